// Binary decoding and encoding without reflection. protobuf-es's fromBinary and toBinary wrap
// every message they read or write, nested ones included, in a reflection object (three Maps, one
// of them a table of the message's fields by number, built again for each message); at the
// collector's rate of Reports, decoding each Report and encoding each Directive that way was a
// quarter of its CPU and much of its garbage. decodeMessage and encodeMessage read and write the
// same bytes from the same descriptors, with each message type's plan built once, and build the
// same objects.
//
// They handle what the ws schemas use (proto3: scalars, open enums, messages, oneofs, repeated
// fields). Anything else is left to protobuf-es itself: a message type outside that set (proto2 or
// editions, maps, groups, wrappers, 64-bit integers as strings), a field number the schema does
// not know (fromBinary keeps it as an unknown field), a singular message sent twice (fromBinary
// merges the two), bytes that do not decode and values that do not encode. So the result, or the
// error, is always protobuf-es's; this is only faster on the common path
// (test/codec.test.ts holds the two to the same output).
import {
  create,
  fromBinary,
  type DescField,
  type DescMessage,
  type MessageShape,
  ScalarType,
  toBinary,
} from "@bufbuild/protobuf";
import { BinaryReader, BinaryWriter, WireType } from "@bufbuild/protobuf/wire";

/** protobuf-es's value of `desc.file.edition` for a proto3 file. */
const EDITION_PROTO3 = 999;
/** fromBinary's default recursion limit. */
const RECURSION_LIMIT = 100;

interface MessagePlan {
  readonly desc: DescMessage;
  readonly fields: ReadonlyMap<number, DescField>;
  /** The fields by number: the order toBinary writes them in. */
  readonly sorted: readonly DescField[];
  /** A zero message (create(desc)) whose values are immutable; lists and oneofs get fresh ones per message. */
  readonly zero: Record<string, unknown>;
  readonly lists: readonly string[];
  readonly oneofs: readonly string[];
}

/** Thrown inside decodeMessage and encodeMessage: this message is protobuf-es's to read or write. */
const LEAVE_TO_PROTOBUF_ES = Symbol("leave to protobuf-es");

const plans = new WeakMap<DescMessage, MessagePlan | null>();

function planOf(desc: DescMessage): MessagePlan | null {
  let plan = plans.get(desc);
  if (plan === undefined) {
    plan = makePlan(desc);
    plans.set(desc, plan);
  }
  return plan;
}

function fieldReadable(field: DescField): boolean {
  if (field.fieldKind === "map") return false;
  if (field.fieldKind === "enum") return field.enum.open;
  if (field.fieldKind === "message" || (field.fieldKind === "list" && field.listKind === "message"))
    return !field.delimitedEncoding && !field.message.typeName.startsWith("google.protobuf.");
  if (field.fieldKind === "list" && field.listKind === "enum") return field.enum.open;
  return !field.longAsString;
}

function makePlan(desc: DescMessage): MessagePlan | null {
  if (desc.file.edition !== EDITION_PROTO3 || desc.typeName.startsWith("google.protobuf.")) return null;
  if (!desc.fields.every(fieldReadable)) return null;
  return {
    desc,
    fields: new Map(desc.fields.map((field) => [field.number, field])),
    sorted: [...desc.fields].sort((a, b) => a.number - b.number),
    zero: create(desc) as unknown as Record<string, unknown>,
    lists: desc.fields.filter((field) => field.fieldKind === "list").map((field) => field.localName),
    oneofs: desc.oneofs.map((oneof) => oneof.localName),
  };
}

/** Whether decodeMessage and encodeMessage handle messages of this type themselves (rather than protobuf-es); for tests. */
export function codecWithoutReflection(desc: DescMessage): boolean {
  return planOf(desc) !== null;
}

/** fromBinary(schema, bytes), faster on the common path (see the top of this file). */
export function decodeMessage<Desc extends DescMessage>(schema: Desc, bytes: Uint8Array): MessageShape<Desc> {
  const plan = planOf(schema);
  if (plan) {
    try {
      const reader = new BinaryReader(bytes);
      return readMessage(plan, reader, bytes, bytes.byteLength, 1) as unknown as MessageShape<Desc>;
    } catch {
      // An unknown field, a merge, or bytes that do not decode: fromBinary says what they are.
    }
  }
  return fromBinary(schema, bytes);
}

function readMessage(
  plan: MessagePlan,
  reader: BinaryReader,
  bytes: Uint8Array,
  length: number,
  depth: number,
): Record<string, unknown> {
  if (depth > RECURSION_LIMIT) throw LEAVE_TO_PROTOBUF_ES;
  const message: Record<string, unknown> = { ...plan.zero };
  for (const name of plan.lists) message[name] = [];
  for (const name of plan.oneofs) message[name] = { case: undefined };
  const end = reader.pos + length;
  while (reader.pos < end) {
    // reader.tag() without its array per field; a tag it would refuse (a varint past 32 bits, wire
    // type 6 or 7, field 0: no field of the plan) is left to fromBinary's error.
    const start = reader.pos;
    const tag = reader.uint32();
    if (reader.pos - start > 5 || (reader.pos - start === 5 && bytes[reader.pos - 1]! > 0x0f))
      throw LEAVE_TO_PROTOBUF_ES;
    const wireType = tag & 7;
    const field = plan.fields.get(tag >>> 3);
    if (!field || wireType > 5) throw LEAVE_TO_PROTOBUF_ES;
    switch (field.fieldKind) {
      case "scalar":
        setField(message, field, readScalar(reader, field.scalar, field.utf8Validation));
        break;
      case "enum":
        setField(message, field, reader.int32());
        break;
      case "message": {
        const current = field.oneof
          ? (message[field.oneof.localName] as { case: string | undefined }).case === field.localName
          : message[field.localName] !== undefined;
        if (current) throw LEAVE_TO_PROTOBUF_ES;
        setField(message, field, readNested(field.message, reader, bytes, depth));
        break;
      }
      case "list": {
        const list = message[field.localName] as unknown[];
        if (field.listKind === "message") {
          list.push(readNested(field.message, reader, bytes, depth));
          break;
        }
        const scalar = field.listKind === "enum" ? ScalarType.INT32 : field.scalar;
        const packed =
          wireType === WireType.LengthDelimited && scalar !== ScalarType.STRING && scalar !== ScalarType.BYTES;
        if (!packed) {
          list.push(readScalar(reader, scalar, field.utf8Validation));
          break;
        }
        const packedEnd = reader.uint32() + reader.pos;
        while (reader.pos < packedEnd) list.push(readScalar(reader, scalar, field.utf8Validation));
        break;
      }
      default:
        throw LEAVE_TO_PROTOBUF_ES;
    }
  }
  return message;
}

function readNested(
  desc: DescMessage,
  reader: BinaryReader,
  bytes: Uint8Array,
  depth: number,
): Record<string, unknown> {
  const plan = planOf(desc);
  if (!plan) throw LEAVE_TO_PROTOBUF_ES;
  return readMessage(plan, reader, bytes, reader.uint32(), depth + 1);
}

function setField(message: Record<string, unknown>, field: DescField, value: unknown): void {
  if (field.oneof) message[field.oneof.localName] = { case: field.localName, value };
  else message[field.localName] = value;
}

/** As fromBinary reads each scalar type. */
function readScalar(reader: BinaryReader, type: ScalarType, validateUtf8: boolean): unknown {
  switch (type) {
    case ScalarType.STRING:
      return reader.string(validateUtf8);
    case ScalarType.BOOL:
      return reader.bool();
    case ScalarType.DOUBLE:
      return reader.double();
    case ScalarType.FLOAT:
      return reader.float();
    case ScalarType.INT32:
      return reader.int32();
    case ScalarType.INT64:
      return reader.int64();
    case ScalarType.UINT64:
      return reader.uint64();
    case ScalarType.FIXED64:
      return reader.fixed64();
    case ScalarType.BYTES:
      return reader.bytes();
    case ScalarType.FIXED32:
      return reader.fixed32();
    case ScalarType.SFIXED32:
      return reader.sfixed32();
    case ScalarType.SFIXED64:
      return reader.sfixed64();
    case ScalarType.SINT64:
      return reader.sint64();
    case ScalarType.UINT32:
      return reader.uint32();
    case ScalarType.SINT32:
      return reader.sint32();
  }
}

/** toBinary(schema, message), faster on the common path (see the top of this file). */
export function encodeMessage<Desc extends DescMessage>(schema: Desc, message: MessageShape<Desc>): Uint8Array {
  const plan = planOf(schema);
  if (plan) {
    try {
      return writeMessage(plan, new BinaryWriter(), message as unknown as Record<string, unknown>).finish();
    } catch {
      // A value that does not encode: toBinary says which.
    }
  }
  return toBinary(schema, message);
}

type Unknown = ReadonlyArray<{ no: number; wireType: WireType; data: Uint8Array }>;

function writeMessage(plan: MessagePlan, writer: BinaryWriter, message: Record<string, unknown>): BinaryWriter {
  for (const field of plan.sorted) {
    const value = fieldValue(message, field);
    if (value === undefined) continue;
    switch (field.fieldKind) {
      case "scalar":
        writeScalar(writer.tag(field.number, wireTypeOf(field.scalar)), field.scalar, value);
        break;
      case "enum":
        writer.tag(field.number, WireType.Varint).int32(value as number);
        break;
      case "message":
        writeNested(field.message, writer.tag(field.number, WireType.LengthDelimited), value);
        break;
      case "list": {
        const list = value as readonly unknown[];
        if (field.listKind === "message") {
          for (const item of list) writeNested(field.message, writer.tag(field.number, WireType.LengthDelimited), item);
          break;
        }
        const scalar = field.listKind === "enum" ? ScalarType.INT32 : field.scalar;
        if (field.packed) {
          writer.tag(field.number, WireType.LengthDelimited).fork();
          for (const item of list) writeScalar(writer, scalar, item);
          writer.join();
          break;
        }
        for (const item of list) writeScalar(writer.tag(field.number, wireTypeOf(scalar)), scalar, item);
        break;
      }
      default:
        throw LEAVE_TO_PROTOBUF_ES;
    }
  }
  for (const { no, wireType, data } of (message.$unknown as Unknown | undefined) ?? [])
    writer.tag(no, wireType).raw(data);
  return writer;
}

function writeNested(desc: DescMessage, writer: BinaryWriter, message: unknown): void {
  const plan = planOf(desc);
  if (!plan) throw LEAVE_TO_PROTOBUF_ES;
  writeMessage(plan, writer.fork(), message as Record<string, unknown>).join();
}

/** The field's value when toBinary would write it (it is set), else undefined. */
function fieldValue(message: Record<string, unknown>, field: DescField): unknown {
  if (field.oneof) {
    const oneof = message[field.oneof.localName] as { case: string | undefined; value?: unknown };
    return oneof.case === field.localName ? oneof.value : undefined;
  }
  const value = message[field.localName];
  if (field.presence !== IMPLICIT_PRESENCE)
    return value !== undefined && Object.hasOwn(message, field.localName) ? value : undefined;
  switch (field.fieldKind) {
    case "list":
      return (value as readonly unknown[]).length > 0 ? value : undefined;
    case "enum":
      return value !== field.enum.values[0]!.number ? value : undefined;
    case "scalar":
      return isZero(field.scalar, value) ? undefined : value;
    default:
      throw LEAVE_TO_PROTOBUF_ES;
  }
}

/** protobuf-es's value of FieldPresence.IMPLICIT. */
const IMPLICIT_PRESENCE = 2;

/** As protobuf-es tells a scalar's zero value (which an implicit-presence field does not write). */
function isZero(type: ScalarType, value: unknown): boolean {
  switch (type) {
    case ScalarType.BOOL:
      return value === false;
    case ScalarType.STRING:
      return value === "";
    case ScalarType.BYTES:
      return value instanceof Uint8Array && !value.byteLength;
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return Object.is(value, 0);
    default:
      // biome-ignore lint/suspicious/noDoubleEquals: as protobuf-es: 0, 0n and "0" are all zero
      return value == 0;
  }
}

function wireTypeOf(type: ScalarType): WireType {
  switch (type) {
    case ScalarType.BYTES:
    case ScalarType.STRING:
      return WireType.LengthDelimited;
    case ScalarType.DOUBLE:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
      return WireType.Bit64;
    case ScalarType.FIXED32:
    case ScalarType.SFIXED32:
    case ScalarType.FLOAT:
      return WireType.Bit32;
    default:
      return WireType.Varint;
  }
}

/** As toBinary writes each scalar type. */
function writeScalar(writer: BinaryWriter, type: ScalarType, value: unknown): void {
  // The casts are toBinary's too: a value of the wrong type throws in the writer, and toBinary reports it.
  const v = value as never;
  switch (type) {
    case ScalarType.STRING:
      writer.string(v);
      break;
    case ScalarType.BOOL:
      writer.bool(v);
      break;
    case ScalarType.DOUBLE:
      writer.double(v);
      break;
    case ScalarType.FLOAT:
      writer.float(v);
      break;
    case ScalarType.INT32:
      writer.int32(v);
      break;
    case ScalarType.INT64:
      writer.int64(v);
      break;
    case ScalarType.UINT64:
      writer.uint64(v);
      break;
    case ScalarType.FIXED64:
      writer.fixed64(v);
      break;
    case ScalarType.BYTES:
      writer.bytes(v);
      break;
    case ScalarType.FIXED32:
      writer.fixed32(v);
      break;
    case ScalarType.SFIXED32:
      writer.sfixed32(v);
      break;
    case ScalarType.SFIXED64:
      writer.sfixed64(v);
      break;
    case ScalarType.SINT64:
      writer.sint64(v);
      break;
    case ScalarType.UINT32:
      writer.uint32(v);
      break;
    case ScalarType.SINT32:
      writer.sint32(v);
      break;
  }
}
