// decodeMessage / encodeMessage against protobuf-es's fromBinary / toBinary: the same objects and
// the same bytes for every message type of the protocol, filled field by field, and protobuf-es's
// own answer (or error) for what the fast path leaves to it.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { create, type DescMessage, fromBinary, type MessageShape, ScalarType, toBinary } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import {
  AgentMessageSchema,
  CollectorMessageSchema,
  DirectiveSchema,
  ReportChange,
  ReportSchema,
  SessionSignalSchema,
} from "../src/index.js";
import { codecWithoutReflection, decodeMessage, encodeMessage } from "../src/codec.js";

/** A value of each scalar type that is not its zero value, varied by `seed`. */
function scalarValue(type: ScalarType, seed: number): unknown {
  switch (type) {
    case ScalarType.STRING:
      return `text ${seed} é ✓`;
    case ScalarType.BOOL:
      return true;
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return seed + 0.5;
    case ScalarType.BYTES:
      return new Uint8Array([seed, 1, 2]);
    case ScalarType.INT64:
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
    case ScalarType.SINT64:
      return BigInt(seed) * 1_000_000_007n;
    default:
      return seed + 1;
  }
}

/**
 * A message of `desc` with every field set (each oneof to its `pick`-th member, lists to two
 * items), nested messages to `depth`.
 */
function filled<Desc extends DescMessage>(desc: Desc, depth = 4, pick = 0, seed = 1): MessageShape<Desc> {
  const message = create(desc) as unknown as Record<string, unknown>;
  for (const field of desc.fields) {
    if (field.oneof && field.oneof.fields[pick % field.oneof.fields.length] !== field) continue;
    let value: unknown;
    switch (field.fieldKind) {
      case "scalar":
        value = scalarValue(field.scalar, seed + field.number);
        break;
      case "enum":
        value = field.enum.values[field.enum.values.length - 1]!.number;
        break;
      case "message":
        if (depth === 0) continue;
        value = filled(field.message, depth - 1, pick, seed + field.number);
        break;
      case "list":
        if (field.listKind === "message") {
          if (depth === 0) continue;
          value = [filled(field.message, depth - 1, pick, seed), filled(field.message, depth - 1, pick + 1, seed + 1)];
        } else if (field.listKind === "enum") value = [field.enum.values[0]!.number, 1];
        else value = [scalarValue(field.scalar, seed), scalarValue(field.scalar, seed + 1)];
        break;
      default:
        continue;
    }
    if (field.oneof) message[field.oneof.localName] = { case: field.localName, value };
    else message[field.localName] = value;
  }
  return message as unknown as MessageShape<Desc>;
}

const SCHEMAS: Array<[string, DescMessage]> = [
  ["AgentMessage", AgentMessageSchema],
  ["CollectorMessage", CollectorMessageSchema],
  ["Report", ReportSchema],
  ["Directive", DirectiveSchema],
];

describe("the protocol's codec without reflection", () => {
  it("handles every message type of the protocol itself", () => {
    for (const [, schema] of SCHEMAS) expect(codecWithoutReflection(schema)).toBe(true);
  });

  it.each(SCHEMAS)(
    "%s: the same bytes as toBinary and the same message as fromBinary, for each oneof member",
    (_, schema) => {
      for (let pick = 0; pick < 3; pick++) {
        const message = filled(schema, 4, pick);
        const bytes = toBinary(schema, message);
        expect(encodeMessage(schema, message)).toEqual(bytes);
        const expected = fromBinary(schema, bytes);
        expect(decodeMessage(schema, bytes)).toStrictEqual(expected);
        // Zero values, explicit-presence fields left out, empty lists: written as toBinary does.
        expect(encodeMessage(schema, create(schema))).toEqual(toBinary(schema, create(schema)));
        expect(decodeMessage(schema, new Uint8Array())).toStrictEqual(fromBinary(schema, new Uint8Array()));
      }
    },
  );

  it("writes an explicit-presence field set to its zero value, as toBinary does", () => {
    const directive = create(DirectiveSchema, { status: { stopInSeconds: 0, idleSeconds: 0, explanation: "" } });
    const bytes = toBinary(DirectiveSchema, directive);
    expect(encodeMessage(DirectiveSchema, directive)).toEqual(bytes);
    expect(decodeMessage(DirectiveSchema, bytes)).toStrictEqual(fromBinary(DirectiveSchema, bytes));
  });

  it("carries a Directive's ReportWhen (a deadline of 0 set, repeated kinds packed) as toBinary and fromBinary do", () => {
    for (const nextReportWithinSeconds of [0, 270.5, undefined]) {
      const directive = create(DirectiveSchema, {
        reportWhen: {
          ...(nextReportWithinSeconds === undefined ? {} : { nextReportWithinSeconds }),
          reportAtOnce: [ReportChange.VETO, ReportChange.SESSION, ReportChange.DISK],
        },
      });
      const bytes = toBinary(DirectiveSchema, directive);
      expect(encodeMessage(DirectiveSchema, directive)).toEqual(bytes);
      const decoded = decodeMessage(DirectiveSchema, bytes);
      expect(decoded).toStrictEqual(fromBinary(DirectiveSchema, bytes));
      expect(decoded.reportWhen?.nextReportWithinSeconds).toBe(nextReportWithinSeconds);
      expect(decoded.reportWhen?.reportAtOnce).toEqual([ReportChange.VETO, ReportChange.SESSION, ReportChange.DISK]);
    }
  });

  it("leaves an unknown field to fromBinary, which keeps it, and writes it back as toBinary does", () => {
    const known = toBinary(ReportSchema, filled(ReportSchema, 2));
    const extra = new BinaryWriter().tag(999, WireType.LengthDelimited).string("from a newer agent").finish();
    const bytes = new Uint8Array([...known, ...extra]);
    const decoded = decodeMessage(ReportSchema, bytes);
    expect(decoded).toStrictEqual(fromBinary(ReportSchema, bytes));
    expect(decoded.$unknown).toHaveLength(1);
    expect(encodeMessage(ReportSchema, decoded)).toEqual(toBinary(ReportSchema, decoded));
  });

  it("leaves a singular message sent twice to fromBinary, which merges the two", () => {
    const first = toBinary(ReportSchema, create(ReportSchema, { sessions: { sessions: [{ tty: "pts/0" }] } }));
    const second = toBinary(ReportSchema, create(ReportSchema, { sessions: { sessions: [{ tty: "pts/1" }] } }));
    const bytes = new Uint8Array([...first, ...second]);
    const decoded = decodeMessage(ReportSchema, bytes);
    expect(decoded).toStrictEqual(fromBinary(ReportSchema, bytes));
    expect(decoded.sessions?.sessions.map((s) => s.tty)).toEqual(["pts/0", "pts/1"]);
  });

  it("reads a repeated number written unpacked as fromBinary does", () => {
    // The packed list lives in a nested message; find it wherever it is.
    const packed = findPackedList([AgentMessageSchema, CollectorMessageSchema]);
    expect(packed, "the protocol has no packed list any more").toBeDefined();
    const [desc, list] = packed!;
    const writer = new BinaryWriter();
    for (const value of [3, 300, 70_000]) writer.tag(list.number, WireType.Varint).uint32(value);
    const bytes = writer.finish();
    expect(decodeMessage(desc, bytes)).toStrictEqual(fromBinary(desc, bytes));
  });

  it("fails on bytes that do not decode with fromBinary's error", () => {
    const valid = toBinary(ReportSchema, filled(ReportSchema, 3));
    const cases = [
      valid.subarray(0, valid.length - 3),
      new Uint8Array([0x0a, 0x05, 0x01]),
      new Uint8Array([0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
      new Uint8Array([0x00]),
      // A tag whose varint overflows 32 bits, though its low bits name a known field.
      new Uint8Array([0x8a, 0x80, 0x80, 0x80, 0x10, 0x00]),
      // Wire type 7 on a known field.
      new Uint8Array([0x0f, 0x00]),
      // A string field (SessionSignal.sessions[0].tty) holding invalid UTF-8.
      toBinaryWithBadUtf8(),
    ];
    for (const bytes of cases) {
      let expected: unknown;
      try {
        fromBinary(ReportSchema, bytes);
      } catch (error) {
        expected = error;
      }
      if (expected === undefined)
        expect(decodeMessage(ReportSchema, bytes)).toStrictEqual(fromBinary(ReportSchema, bytes));
      else expect(() => decodeMessage(ReportSchema, bytes)).toThrow((expected as Error).message);
    }
  });

  it("answers any mutation of a valid message as fromBinary does: the same message, or its error (property)", () => {
    const schemas = [AgentMessageSchema, CollectorMessageSchema, ReportSchema, DirectiveSchema] as const;
    const mutation = fc.oneof(
      fc.record({ kind: fc.constant("flip" as const), at: fc.nat(), value: fc.integer({ min: 0, max: 255 }) }),
      fc.record({ kind: fc.constant("cut" as const), at: fc.nat() }),
      fc.record({ kind: fc.constant("insert" as const), at: fc.nat(), bytes: fc.uint8Array({ maxLength: 12 }) }),
    );
    fc.assert(
      fc.property(fc.nat(schemas.length - 1), fc.nat(3), fc.array(mutation, { maxLength: 4 }), (which, pick, steps) => {
        const desc = schemas[which]!;
        let bytes: Uint8Array = toBinary(desc, filled(desc, 3, pick, pick + 1));
        for (const step of steps) {
          const at = bytes.length === 0 ? 0 : step.at % bytes.length;
          if (step.kind === "flip") {
            bytes = bytes.slice();
            if (bytes.length > 0) bytes[at] = step.value;
          } else if (step.kind === "cut") bytes = bytes.subarray(0, at);
          else bytes = new Uint8Array([...bytes.subarray(0, at), ...step.bytes, ...bytes.subarray(at)]);
        }
        let expected: { ok: unknown } | { error: string };
        try {
          expected = { ok: fromBinary(desc, bytes) };
        } catch (error) {
          expected = { error: (error as Error).message };
        }
        if ("ok" in expected) expect(decodeMessage(desc, bytes)).toStrictEqual(expected.ok);
        else expect(() => decodeMessage(desc, bytes)).toThrow(expected.error);
      }),
      { numRuns: 3000 },
    );
  });

  it("fails on a value that does not encode with toBinary's error", () => {
    const report = filled(ReportSchema, 1);
    (report as unknown as { sequence: unknown }).sequence = "not a number";
    expect(() => toBinary(ReportSchema, report)).toThrow();
    const message = (() => {
      try {
        toBinary(ReportSchema, report);
      } catch (error) {
        return (error as Error).message;
      }
    })();
    expect(() => encodeMessage(ReportSchema, report)).toThrow(message);
  });
});

function findPackedList(
  roots: DescMessage[],
): [DescMessage, Extract<DescMessage["fields"][number], { fieldKind: "list" }>] | undefined {
  const seen = new Set<DescMessage>();
  const queue = [...roots];
  while (queue.length > 0) {
    const desc = queue.shift()!;
    if (seen.has(desc)) continue;
    seen.add(desc);
    for (const field of desc.fields) {
      if (field.fieldKind === "list" && field.listKind === "scalar" && field.packed) return [desc, field];
      if (field.fieldKind === "message" || (field.fieldKind === "list" && field.listKind === "message"))
        queue.push(field.message);
    }
  }
  return undefined;
}

function toBinaryWithBadUtf8(): Uint8Array {
  const tty = new BinaryWriter()
    .tag(SESSION_TTY_FIELD(), WireType.LengthDelimited)
    .bytes(new Uint8Array([0xc3, 0x28]))
    .finish();
  const session = new BinaryWriter().tag(1, WireType.LengthDelimited).bytes(tty).finish();
  const sessionsField = ReportSchema.fields.find((f) => f.localName === "sessions")!;
  return new BinaryWriter().tag(sessionsField.number, WireType.LengthDelimited).bytes(session).finish();
}

function SESSION_TTY_FIELD(): number {
  const sessions = SessionSignalSchema.fields.find((f) => f.localName === "sessions")!;
  if (sessions.fieldKind !== "list" || sessions.listKind !== "message")
    throw new Error("SessionSignal.sessions changed");
  expect(sessions.number).toBe(1);
  return sessions.message.fields.find((f) => f.localName === "tty")!.number;
}
