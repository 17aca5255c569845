// Declared config schemas (docs/architecture.md, after the layer table): each program's config file
// is one table of settings (its keys, their types, defaults and limits, what each is for). From
// that one table come the checks every resolver used to write by hand (an unknown key, a section
// that is not a mapping, a value of the wrong type or outside its range, each with the message
// people already know) and the JSON Schema that editors use to check a site's config file as it is
// typed (packaging/schema/*.schema.json, written by scripts/config-schemas.mjs). What stays in the
// resolvers is what a table cannot say: the order of flags, environment and file, and the rules
// that join two settings.
//
// In-house rather than a library (zod, ajv, typebox): the messages are the product here (tests
// and runbooks quote them), the tables are small, and both programs ship as one bundled file each.
import { DurationError, parseDuration } from "./duration.js";
import { isJsonObject, type JsonObject } from "./shape.js";

interface Described {
  /** What the setting is for, in the words docs use; the editor shows it on hover. */
  description: string;
  /** The value when it is unset, as a person writes it in the file (for the schema and docs). */
  default?: string | number | boolean | readonly string[];
  /** Written in the file as an example (for the schema's examples). */
  examples?: readonly (string | number)[];
  /** What a value the setting refuses is told (", not VALUE" follows), after the file's path. */
  refusal?: string;
}

export type Setting = Described &
  (
    | { type: "string"; pattern?: string }
    | { type: "duration" }
    | { type: "boolean" }
    | { type: "integer"; minimum: number; maximum: number }
    | { type: "number"; minimum: number; maximum: number }
    | { type: "enum"; values: readonly string[] }
    | {
        type: "strings";
        minItems?: number;
        /** Each item one of these. */
        items?: readonly string[];
        /** One string is taken as a list of one. */
        orOne?: boolean;
      }
    | { type: "section"; settings: Readonly<Record<string, Setting>>; closed?: boolean }
    | { type: "map"; values?: Setting }
    | { type: "any"; see?: string }
  );

export type SectionSetting = Extract<Setting, { type: "section" }>;

/** JSON Schema (draft 2020-12) for one setting. */
function jsonSchemaOfSetting(setting: Setting): Record<string, unknown> {
  const common: Record<string, unknown> = { description: setting.description };
  if (setting.default !== undefined) common.default = setting.default;
  if (setting.examples) common.examples = setting.examples;
  switch (setting.type) {
    case "string":
      return { type: "string", ...(setting.pattern ? { pattern: setting.pattern } : {}), ...common };
    case "duration":
      // "90s", "5m", "1h30m"; a bare number is seconds.
      return {
        anyOf: [
          { type: "string", pattern: "^\\s*(\\d+(\\.\\d+)?[wdhms])+\\s*$|^\\s*\\d+(\\.\\d+)?\\s*$" },
          { type: "number", minimum: 0 },
        ],
        ...common,
      };
    case "boolean":
      return { type: "boolean", ...common };
    case "integer":
    case "number":
      return { type: setting.type, minimum: setting.minimum, maximum: setting.maximum, ...common };
    case "enum":
      return { enum: [...setting.values], ...common };
    case "strings": {
      const item = setting.items ? { type: "string", enum: [...setting.items] } : { type: "string" };
      const list = { type: "array", items: item, ...(setting.minItems ? { minItems: setting.minItems } : {}) };
      return setting.orOne ? { anyOf: [item, list], ...common } : { ...list, ...common };
    }
    case "section":
      return {
        type: "object",
        properties: Object.fromEntries(
          Object.entries(setting.settings).map(([key, child]) => [key, jsonSchemaOfSetting(child)]),
        ),
        ...(setting.closed ? { additionalProperties: false } : {}),
        ...common,
      };
    case "map":
      return {
        type: "object",
        ...(setting.values ? { additionalProperties: jsonSchemaOfSetting(setting.values) } : {}),
        ...common,
      };
    case "any":
      return { ...common, ...(setting.see ? { description: `${setting.description} (${setting.see})` } : {}) };
  }
}

/** The JSON Schema file's text: what scripts/config-schemas.mjs writes and the tests compare. */
export function jsonSchemaText(schema: SectionSetting, meta: { id: string; title: string }): string {
  return `${JSON.stringify(jsonSchemaOf(schema, meta), null, 2)}\n`;
}

/** The JSON Schema of a config file, for editors (yaml-language-server) and CI. */
export function jsonSchemaOf(schema: SectionSetting, meta: { id: string; title: string }): Record<string, unknown> {
  return {
    $schema: "https://json-schema.org/draft/2020-12/schema",
    $id: meta.id,
    title: meta.title,
    ...jsonSchemaOfSetting(schema),
  };
}

/** The declared setting at a dotted path ("grpc.maxConnections"), or undefined. */
export function settingAt(schema: SectionSetting, path: string): Setting | undefined {
  let current: Setting | undefined = schema;
  for (const key of path.split(".")) {
    if (current?.type !== "section") return undefined;
    current = current.settings[key];
  }
  return current;
}

/** A key of a closed section the table does not declare: named with every key it knows. */
export function unknownSettings(schema: SectionSetting, file: JsonObject, where: string): string[] {
  if (!schema.closed) return [];
  const known = Object.keys(schema.settings);
  return Object.keys(file)
    .filter((key) => !known.includes(key))
    .map((key) => `${where}: unknown setting "${key}" (known: ${known.join(", ")})`);
}

/**
 * Reads a parsed config file through its table, collecting problems instead of throwing: the
 * resolvers ask for a setting by its dotted path and get it checked against its declaration.
 */
export class SettingsReader {
  constructor(
    private readonly schema: SectionSetting,
    private readonly file: JsonObject,
    /** The file's path, which every message about it starts with. */
    readonly where: string,
    readonly problems: string[],
    /** Scalars a string setting takes as their text (the agent's files have long written `name: 42`). */
    private readonly textFrom: readonly ("number" | "boolean")[] = ["number"],
  ) {
    this.problems.push(...unknownSettings(schema, file, where));
  }

  private declared(path: string): Setting {
    const setting = settingAt(this.schema, path);
    if (!setting) throw new Error(`no setting ${path} is declared`); // a resolver asked for a key its table lacks
    return setting;
  }

  /** The raw value at `path`, undefined when it (or a section above it) is absent or null. */
  raw(path: string): unknown {
    const keys = path.split(".");
    let current: unknown = this.file;
    for (const key of keys) {
      if (!isJsonObject(current)) return undefined;
      current = current[key];
      if (current === null) return undefined;
    }
    return current;
  }

  /** A section (a mapping): {} when absent, and a problem when it is something else. */
  section(path: string): JsonObject {
    this.declared(path);
    const value = this.raw(path);
    if (value === undefined) return {};
    if (isJsonObject(value)) return value;
    this.problems.push(`${this.where}: "${path}" must be a mapping`);
    return {};
  }

  /** A string setting (a number, or a boolean where allowed, as its text). */
  text(path: string): string | undefined {
    this.declared(path);
    const value = this.raw(path);
    if (value === undefined) return undefined;
    if (typeof value === "string") return value;
    if ((typeof value === "number" || typeof value === "boolean") && this.textFrom.includes(typeof value as never))
      return String(value);
    this.problems.push(`${this.where}: ${path}: expected a string`);
    return undefined;
  }

  /** A list of strings. */
  strings(path: string): string[] | undefined {
    this.declared(path);
    const value = this.raw(path);
    if (value === undefined) return undefined;
    if (Array.isArray(value) && value.every((item) => typeof item === "string")) return value as string[];
    this.problems.push(`${this.where}: ${path}: expected a list of strings`);
    return undefined;
  }

  /** A whole number or a number in its declared range; outside it, the declared refusal with the value. */
  count(path: string): number | undefined {
    const setting = this.declared(path);
    if (setting.type !== "integer" && setting.type !== "number") throw new Error(`${path} is not a number setting`);
    const value = this.raw(path);
    if (value === undefined) return undefined;
    if (
      typeof value === "number" &&
      Number.isFinite(value) &&
      (setting.type === "number" || Number.isInteger(value)) &&
      value >= setting.minimum &&
      value <= setting.maximum
    )
      return value;
    const shown = JSON.stringify(value)?.slice(0, 40);
    this.problems.push(
      setting.refusal
        ? `${this.where}: ${setting.refusal}, not ${shown}`
        : `${this.where}: ${path} must be a ${setting.type === "integer" ? "whole number" : "number"} from ${setting.minimum} to ${setting.maximum}, not ${shown}`,
    );
    return undefined;
  }

  /** One of the declared values; otherwise "must be a or b". */
  choice<T extends string>(path: string, fallback: T): T {
    const setting = this.declared(path);
    if (setting.type !== "enum") throw new Error(`${path} is not an enum setting`);
    const text = this.text(path) ?? fallback;
    if (setting.values.includes(text)) return text as T;
    this.problems.push(`${this.where}: ${path} must be ${setting.values.join(" or ")}, not "${text.slice(0, 40)}"`);
    return fallback;
  }
}

/**
 * A duration setting's seconds (a bare number is seconds), or the fallback with a problem
 * "LABEL: …" (the label is the setting's path, or the words used when flags and environment can
 * set it too).
 */
export function durationSetting(
  text: string | undefined,
  label: string,
  fallbackSeconds: number,
  problems: string[],
  minSeconds?: number,
): number {
  if (text === undefined) return fallbackSeconds;
  try {
    const seconds = parseDuration(text, { allowBareSeconds: true });
    if (minSeconds !== undefined && seconds < minSeconds) {
      problems.push(`${label}: ${text} is too short (at least ${minSeconds}s)`);
      return fallbackSeconds;
    }
    return seconds;
  } catch (error) {
    problems.push(`${label}: ${error instanceof DurationError ? error.message : String(error)}`);
    return fallbackSeconds;
  }
}
