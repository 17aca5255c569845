// V8 heap snapshots (.heapsnapshot, as --heapsnapshot-signal writes them) summarized by what
// holds the memory, and two summaries compared: what a soak run grew. Pure apart from reading
// the file.
import { readFileSync } from "node:fs";

/** Objects of one kind in a snapshot: V8's node type and, for objects and closures, the constructor or function name. */
export interface HeapGroup {
  key: string;
  count: number;
  selfBytes: number;
}

export interface HeapSummary {
  nodes: number;
  totalSelfBytes: number;
  groups: Map<string, HeapGroup>;
}

interface SnapshotJson {
  snapshot: { meta: { node_fields: string[]; node_types: unknown[] } };
  nodes: number[];
  strings: string[];
}

/**
 * Groups a parsed snapshot's nodes. Strings, numbers and code are grouped by type only (their
 * "name" is their content or a function's source position); objects, closures and native
 * objects by name, so a growing Map, array of Reports or listener list shows as its constructor.
 */
export function summarizeHeapSnapshot(json: SnapshotJson): HeapSummary {
  const fields = json.snapshot.meta.node_fields;
  const types = json.snapshot.meta.node_types[0] as string[];
  const stride = fields.length;
  const typeAt = fields.indexOf("type");
  const nameAt = fields.indexOf("name");
  const sizeAt = fields.indexOf("self_size");
  if (typeAt < 0 || nameAt < 0 || sizeAt < 0)
    throw new Error("not a V8 heap snapshot: node_fields lacks type, name or self_size");
  const groups = new Map<string, HeapGroup>();
  let totalSelfBytes = 0;
  const byName = new Set(["object", "closure", "native", "array", "regexp", "hidden", "object shape"]);
  for (let i = 0; i < json.nodes.length; i += stride) {
    const type = types[json.nodes[i + typeAt]!] ?? "?";
    const size = json.nodes[i + sizeAt]!;
    const key = byName.has(type) ? `${type} ${json.strings[json.nodes[i + nameAt]!] || "(anonymous)"}` : `(${type})`;
    let group = groups.get(key);
    if (group === undefined) {
      group = { key, count: 0, selfBytes: 0 };
      groups.set(key, group);
    }
    group.count++;
    group.selfBytes += size;
    totalSelfBytes += size;
  }
  return { nodes: json.nodes.length / stride, totalSelfBytes, groups };
}

export function readHeapSnapshot(file: string): HeapSummary {
  return summarizeHeapSnapshot(JSON.parse(readFileSync(file, "utf8")) as SnapshotJson);
}

export interface HeapGrowth {
  key: string;
  countBefore: number;
  countAfter: number;
  bytesBefore: number;
  bytesAfter: number;
}

/** The groups whose self size changed most between two snapshots, largest growth first. Pure. */
export function heapGrowth(before: HeapSummary, after: HeapSummary, limit = 15): HeapGrowth[] {
  const keys = new Set([...before.groups.keys(), ...after.groups.keys()]);
  const rows: HeapGrowth[] = [];
  for (const key of keys) {
    const a = before.groups.get(key);
    const b = after.groups.get(key);
    rows.push({
      key,
      countBefore: a?.count ?? 0,
      countAfter: b?.count ?? 0,
      bytesBefore: a?.selfBytes ?? 0,
      bytesAfter: b?.selfBytes ?? 0,
    });
  }
  return rows
    .filter((row) => row.bytesAfter !== row.bytesBefore || row.countAfter !== row.countBefore)
    .sort(
      (x, y) =>
        Math.abs(y.bytesAfter - y.bytesBefore) - Math.abs(x.bytesAfter - x.bytesBefore) || x.key.localeCompare(y.key),
    )
    .slice(0, limit);
}
