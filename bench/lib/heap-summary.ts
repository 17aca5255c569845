// A V8 heap snapshot (.heapsnapshot, as --heapsnapshot-signal writes it) summed by type: what
// the live heap is made of, without opening DevTools. Each node's self size is added to the row
// of its kind and constructor ("object Map", "closure", "string", "array (object elements)").
import { readFileSync } from "node:fs";

export interface HeapRow {
  kind: string;
  count: number;
  bytes: number;
}

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
  nodes: number[];
  strings: string[];
}

/** Rows by self size, largest first; objects and closures by constructor, the rest by V8's type. */
export function summarizeHeapSnapshot(file: string): { rows: HeapRow[]; totalBytes: number } {
  const snapshot = JSON.parse(readFileSync(file, "utf8")) as Snapshot;
  const fields = snapshot.snapshot.meta.node_fields;
  const types = snapshot.snapshot.meta.node_types[0];
  const width = fields.length;
  const typeAt = fields.indexOf("type");
  const nameAt = fields.indexOf("name");
  const sizeAt = fields.indexOf("self_size");
  const rows = new Map<string, HeapRow>();
  let totalBytes = 0;
  for (let i = 0; i < snapshot.nodes.length; i += width) {
    const type = types[snapshot.nodes[i + typeAt]!] ?? "?";
    const size = snapshot.nodes[i + sizeAt]!;
    totalBytes += size;
    const name = snapshot.strings[snapshot.nodes[i + nameAt]!] ?? "";
    const kind =
      type === "object" || type === "native"
        ? `${type} ${name.split(" ")[0]!.slice(0, 60)}`
        : type === "array" || type === "hidden" || type === "code"
          ? `${type} ${name.slice(0, 40)}`
          : type.includes("string")
            ? "strings"
            : type;
    const row = rows.get(kind) ?? { kind, count: 0, bytes: 0 };
    row.count++;
    row.bytes += size;
    rows.set(kind, row);
  }
  return { rows: [...rows.values()].sort((a, b) => b.bytes - a.bytes), totalBytes };
}
