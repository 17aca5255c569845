/**
 * A QEMU Machine Protocol client on a unix socket: the greeting, capability negotiation, then
 * commands matched to their answers by id, and asynchronous events kept in order.
 * QMP is JSON objects separated by CRLF/LF; splitQmpMessages is the pure part.
 */
import net from "node:net";

export interface QmpEvent {
  event: string;
  data?: unknown;
  timestamp?: { seconds: number; microseconds: number };
}

export type QmpMessage =
  | { kind: "greeting"; version: unknown }
  | { kind: "return"; id?: unknown; value: unknown }
  | { kind: "error"; id?: unknown; errorClass: string; description: string }
  | { kind: "event"; event: QmpEvent };

/** Complete lines of `buffer` as QMP messages, and the incomplete rest. */
export function splitQmpMessages(buffer: string): { messages: QmpMessage[]; rest: string } {
  const lines = buffer.split("\n");
  const rest = lines.pop() ?? "";
  const messages: QmpMessage[] = [];
  for (const line of lines) {
    if (line.trim() === "") continue;
    let parsed: Record<string, unknown>;
    try {
      parsed = JSON.parse(line) as Record<string, unknown>;
    } catch {
      throw new Error(`QMP: not JSON: ${JSON.stringify(line.slice(0, 200))}`);
    }
    if ("QMP" in parsed) {
      messages.push({ kind: "greeting", version: (parsed.QMP as { version?: unknown }).version });
    } else if ("return" in parsed) {
      messages.push({ kind: "return", id: parsed.id, value: parsed.return });
    } else if ("error" in parsed) {
      const error = parsed.error as { class?: string; desc?: string };
      messages.push({ kind: "error", id: parsed.id, errorClass: error.class ?? "", description: error.desc ?? "" });
    } else if (typeof parsed.event === "string") {
      messages.push({ kind: "event", event: parsed as unknown as QmpEvent });
    } else {
      throw new Error(`QMP: unexpected message ${line.slice(0, 200)}`);
    }
  }
  return { messages, rest };
}

export class QmpClient {
  private buffer = "";
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  private readonly received: QmpEvent[] = [];
  private greeted: Promise<void>;
  private closedError: Error | undefined;

  private constructor(
    private readonly socket: net.Socket,
    readonly socketPath: string,
  ) {
    let greet: () => void = () => {};
    let failGreeting: (error: Error) => void = () => {};
    this.greeted = new Promise((resolve, reject) => {
      greet = resolve;
      failGreeting = reject;
    });
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => {
      let split;
      try {
        split = splitQmpMessages(this.buffer + chunk);
      } catch (error) {
        socket.destroy(error as Error);
        return;
      }
      this.buffer = split.rest;
      for (const message of split.messages) {
        if (message.kind === "greeting") greet();
        else if (message.kind === "event") this.received.push(message.event);
        else {
          const waiter = typeof message.id === "number" ? this.pending.get(message.id) : undefined;
          if (!waiter) continue;
          this.pending.delete(message.id as number);
          if (message.kind === "return") waiter.resolve(message.value);
          else waiter.reject(new Error(`QMP ${message.errorClass}: ${message.description}`));
        }
      }
    });
    const fail = (error: Error) => {
      this.closedError ??= error;
      failGreeting(error);
      for (const waiter of this.pending.values()) waiter.reject(error);
      this.pending.clear();
    };
    socket.on("error", fail);
    socket.on("close", () => fail(new Error(`QMP connection to ${socketPath} closed`)));
  }

  /** Connects, retrying while QEMU has not created the socket yet. */
  static async connect(socketPath: string, timeoutMs = 30_000): Promise<QmpClient> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      try {
        const socket = await new Promise<net.Socket>((resolve, reject) => {
          const s = net.createConnection(socketPath);
          s.once("connect", () => resolve(s));
          s.once("error", reject);
        });
        const client = new QmpClient(socket, socketPath);
        await client.greeted;
        await client.execute("qmp_capabilities");
        return client;
      } catch (error) {
        if (Date.now() > deadline) throw new Error(`cannot talk QMP on ${socketPath}: ${(error as Error).message}`);
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }
  }

  execute<T = unknown>(command: string, args?: Record<string, unknown>): Promise<T> {
    if (this.closedError) return Promise.reject(this.closedError);
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
      this.socket.write(`${JSON.stringify({ execute: command, ...(args ? { arguments: args } : {}), id })}\n`);
    });
  }

  events(): readonly QmpEvent[] {
    return this.received;
  }

  close(): void {
    this.socket.destroy();
  }
}
