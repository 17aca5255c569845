// The one adapter between protobuf-es generated services and @grpc/grpc-js.
// No .proto is loaded at run time: paths and codecs come from the GenService.
import * as grpc from "@grpc/grpc-js";
import type { DescMessage, MessageShape } from "@bufbuild/protobuf";
import type { DescMethod, DescService } from "@bufbuild/protobuf";
import type { GenService, GenServiceMethods } from "@bufbuild/protobuf/codegenv2";
import { decodeMessage, encodeMessage } from "./codec.js";

/** Returned by a server-side deserializer instead of throwing, so the handler can answer INVALID_ARGUMENT. */
export class DecodeFailure {
  constructor(
    readonly reason: string,
    readonly byteLength: number,
  ) {}
}

export function methodPath(method: DescMethod): string {
  return `/${method.parent.typeName}/${method.name}`;
}

function encoder<Desc extends DescMessage>(schema: Desc) {
  return (message: MessageShape<Desc>): Buffer => {
    const bytes = encodeMessage(schema, message);
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  };
}

const wire = new WeakMap<object, Uint8Array>();

/**
 * The bytes a server-side message was decoded from (a copy: grpc-js's buffer may be a slice of a
 * larger one). Kept as long as the message is: a receiver that needs the message again later can
 * hold these ~1 kB instead of the decoded object, several times larger (the collector's latest
 * Report of each VM, model/compact-report.ts).
 */
export function wireBytesOf(message: object): Uint8Array | undefined {
  return wire.get(message);
}

/** Server side: never throws (grpc-js would turn a throw into INTERNAL). */
function tolerantDecoder<Desc extends DescMessage>(schema: Desc) {
  return (bytes: Buffer): MessageShape<Desc> | DecodeFailure => {
    try {
      // Decoded from the copy: its strings are then read through plain Uint8Array views, not Buffers.
      const copy = new Uint8Array(bytes);
      const message = decodeMessage(schema, copy);
      wire.set(message, copy);
      return message;
    } catch (error) {
      return new DecodeFailure(error instanceof Error ? error.message : String(error), bytes.length);
    }
  };
}

/** Client side: a throw becomes an error status on the call, which the client handles. */
function strictDecoder<Desc extends DescMessage>(schema: Desc) {
  return (bytes: Buffer): MessageShape<Desc> => decodeMessage(schema, bytes);
}

function definitionFor(service: DescService, side: "server" | "client"): grpc.ServiceDefinition {
  const definition: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  for (const method of service.methods) {
    definition[method.localName] = {
      path: methodPath(method),
      requestStream: method.methodKind === "client_streaming" || method.methodKind === "bidi_streaming",
      responseStream: method.methodKind === "server_streaming" || method.methodKind === "bidi_streaming",
      requestSerialize: encoder(method.input) as (value: unknown) => Buffer,
      requestDeserialize: side === "server" ? tolerantDecoder(method.input) : strictDecoder(method.input),
      responseSerialize: encoder(method.output) as (value: unknown) => Buffer,
      responseDeserialize: strictDecoder(method.output),
      originalName: method.name,
    };
  }
  return definition;
}

/** grpc-js service definition for `server.addService`. Requests that fail to decode arrive as DecodeFailure. */
export function serverDefinition(service: DescService): grpc.ServiceDefinition {
  return definitionFor(service, "server");
}

type BidiMethods<M extends GenServiceMethods> = {
  [K in keyof M as M[K]["methodKind"] extends "bidi_streaming" ? K : never]: M[K];
};

/** A server-side bidi stream with typed, validated input. */
export interface BidiServerStream<In, Out> {
  readonly call: grpc.ServerDuplexStream<unknown, Out>;
  peer(): string;
  metadata(): grpc.Metadata;
  write(message: Out): boolean;
  /** Ends the stream with a non-OK status. */
  fail(code: grpc.status, details: string, metadata?: grpc.Metadata): void;
  /** Ends the stream with OK. */
  end(): void;
  onMessage(listener: (message: In) => void): void;
  onEnd(listener: (reason: "client-ended" | "cancelled" | "error" | "decode-failure") => void): void;
}

/**
 * Wraps a bidi handler: a message that does not decode ends that stream with
 * INVALID_ARGUMENT (and only that stream); the handler sees typed messages only.
 */
export function bidiHandler<In, Out>(
  handle: (stream: BidiServerStream<In, Out>) => void,
  onDecodeFailure?: (failure: DecodeFailure, peer: string) => void,
): grpc.handleBidiStreamingCall<unknown, Out> {
  return (call) => {
    let ended = false;
    const messageListeners: Array<(message: In) => void> = [];
    const endListeners: Array<(reason: "client-ended" | "cancelled" | "error" | "decode-failure") => void> = [];
    const finish = (reason: "client-ended" | "cancelled" | "error" | "decode-failure") => {
      if (ended) return;
      ended = true;
      for (const listener of endListeners) listener(reason);
    };
    const stream: BidiServerStream<In, Out> = {
      call,
      peer: () => call.getPeer(),
      metadata: () => call.metadata,
      write: (message) => (ended ? false : call.write(message)),
      fail: (code, details, metadata) => {
        if (ended) return;
        call.emit("error", { code, details, ...(metadata ? { metadata } : {}) });
        finish("error");
      },
      end: () => {
        if (ended) return;
        call.end();
        finish("client-ended");
      },
      onMessage: (listener) => messageListeners.push(listener),
      onEnd: (listener) => endListeners.push(listener),
    };
    call.on("data", (data: unknown) => {
      if (ended) return;
      if (data instanceof DecodeFailure) {
        onDecodeFailure?.(data, call.getPeer());
        call.emit("error", {
          code: grpc.status.INVALID_ARGUMENT,
          details: `malformed message (${data.byteLength} bytes): ${data.reason}`,
        });
        finish("decode-failure");
        return;
      }
      for (const listener of messageListeners) listener(data as In);
    });
    call.on("end", () => {
      if (!ended) call.end();
      finish("client-ended");
    });
    call.on("cancelled", () => finish("cancelled"));
    call.on("error", () => finish("error"));
    handle(stream);
  };
}

/** A grpc-js client constructor for the generated service. */
export function clientConstructor(service: DescService): grpc.ServiceClientConstructor {
  return grpc.makeGenericClientConstructor(definitionFor(service, "client"), service.name);
}

/** Opens a typed bidi call on a client made with clientConstructor. */
export function openBidi<M extends GenServiceMethods, K extends keyof BidiMethods<M> & string>(
  client: grpc.Client,
  service: GenService<M>,
  method: K,
  metadata: grpc.Metadata,
  options: grpc.CallOptions = {},
): grpc.ClientDuplexStream<MessageShape<M[K]["input"]>, MessageShape<M[K]["output"]>> {
  const desc = service.method[method];
  if (!desc) throw new Error(`service ${service.typeName} has no method ${method}`);
  return client.makeBidiStreamRequest(
    methodPath(desc),
    encoder(desc.input),
    strictDecoder(desc.output),
    metadata,
    options,
  ) as unknown as grpc.ClientDuplexStream<MessageShape<M[K]["input"]>, MessageShape<M[K]["output"]>>;
}
