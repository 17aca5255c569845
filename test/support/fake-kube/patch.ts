/** JSON merge patch (RFC 7386) and JSON patch (RFC 6902), as the apiserver applies them. */

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

function isObject(v: unknown): v is { [key: string]: Json } {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

export function applyMergePatch(target: Json | undefined, patch: Json): Json {
  if (!isObject(patch)) return structuredClone(patch);
  const result: { [key: string]: Json } = isObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) {
      delete result[key];
    } else {
      result[key] = applyMergePatch(result[key], value);
    }
  }
  return result;
}

export class JsonPatchError extends Error {
  constructor(
    message: string,
    /** A failed `test` operation: KubeVirt turns these into 409 Conflict. */
    readonly testFailed = false,
  ) {
    super(message);
  }
}

interface Operation {
  op: string;
  path: string;
  from?: string;
  value?: Json;
}

function parsePointer(pointer: string): string[] {
  if (pointer === "") return [];
  if (!pointer.startsWith("/")) throw new JsonPatchError(`invalid JSON pointer ${JSON.stringify(pointer)}`);
  return pointer
    .slice(1)
    .split("/")
    .map((t) => t.replace(/~1/g, "/").replace(/~0/g, "~"));
}

function resolveParent(doc: Json, tokens: string[]): { parent: Json; key: string } {
  let node: Json = doc;
  for (const token of tokens.slice(0, -1)) {
    if (Array.isArray(node)) {
      const next: Json | undefined = node[Number(token)];
      if (next === undefined) throw new JsonPatchError(`path segment ${token} not found`);
      node = next;
    } else if (isObject(node)) {
      const next: Json | undefined = node[token];
      if (next === undefined) throw new JsonPatchError(`path segment ${token} not found`);
      node = next;
    } else {
      throw new JsonPatchError(`path segment ${token} not found`);
    }
  }
  return { parent: node, key: tokens[tokens.length - 1] ?? "" };
}

function getAt(doc: Json, pointer: string): Json | undefined {
  let node: Json | undefined = doc;
  for (const token of parsePointer(pointer)) {
    if (Array.isArray(node)) node = node[Number(token)];
    else if (isObject(node)) node = node[token];
    else return undefined;
  }
  return node;
}

function add(doc: Json, pointer: string, value: Json): Json {
  const tokens = parsePointer(pointer);
  if (tokens.length === 0) return value;
  const { parent, key } = resolveParent(doc, tokens);
  if (Array.isArray(parent)) {
    const index = key === "-" ? parent.length : Number(key);
    if (!Number.isInteger(index) || index < 0 || index > parent.length) {
      throw new JsonPatchError(`array index ${key} out of range`);
    }
    parent.splice(index, 0, value);
  } else if (isObject(parent)) {
    parent[key] = value;
  } else {
    throw new JsonPatchError(`cannot add at ${pointer}`);
  }
  return doc;
}

function remove(doc: Json, pointer: string): Json {
  const tokens = parsePointer(pointer);
  const { parent, key } = resolveParent(doc, tokens);
  if (Array.isArray(parent)) {
    const index = Number(key);
    if (!(index >= 0 && index < parent.length)) throw new JsonPatchError(`array index ${key} out of range`);
    parent.splice(index, 1);
  } else if (isObject(parent) && key in parent) {
    delete parent[key];
  } else {
    throw new JsonPatchError(`unable to remove nonexistent key: ${key}`);
  }
  return doc;
}

function deepEqual(a: unknown, b: unknown): boolean {
  return JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));
}

export function canonical(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(canonical);
  if (isObject(v)) {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(v).sort()) out[key] = canonical(v[key]);
    return out;
  }
  return v;
}

export function applyJsonPatch(target: Json, operations: unknown): Json {
  if (!Array.isArray(operations)) throw new JsonPatchError("a JSON patch must be an array of operations");
  let doc = structuredClone(target);
  for (const raw of operations as Operation[]) {
    if (!isObject(raw as unknown) || typeof raw.op !== "string" || typeof raw.path !== "string") {
      throw new JsonPatchError(`invalid operation ${JSON.stringify(raw)}`);
    }
    switch (raw.op) {
      case "add":
        doc = add(doc, raw.path, structuredClone(raw.value ?? null));
        break;
      case "remove":
        doc = remove(doc, raw.path);
        break;
      case "replace":
        if (getAt(doc, raw.path) === undefined) {
          throw new JsonPatchError(`replace operation does not apply: doc is missing key: ${raw.path}`);
        }
        doc = remove(doc, raw.path);
        doc = add(doc, raw.path, structuredClone(raw.value ?? null));
        break;
      case "test": {
        const actual = getAt(doc, raw.path);
        if (!deepEqual(actual ?? null, raw.value ?? null)) {
          throw new JsonPatchError(`testing value ${raw.path} failed: test operation does not apply`, true);
        }
        break;
      }
      case "move":
      case "copy": {
        if (typeof raw.from !== "string") throw new JsonPatchError(`${raw.op} needs "from"`);
        const value = getAt(doc, raw.from);
        if (value === undefined) throw new JsonPatchError(`${raw.op} from ${raw.from}: not found`);
        if (raw.op === "move") doc = remove(doc, raw.from);
        doc = add(doc, raw.path, structuredClone(value));
        break;
      }
      default:
        throw new JsonPatchError(`unknown operation ${JSON.stringify(raw.op)}`);
    }
  }
  return doc;
}

export function jsonEqual(a: unknown, b: unknown): boolean {
  return deepEqual(a, b);
}
