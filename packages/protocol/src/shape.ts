// The one test for "a mapping" in parsed YAML or JSON (config files, annotations): an object
// that is neither null nor an array.
export type JsonObject = Record<string, unknown>;

export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
