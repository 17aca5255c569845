// The collector's folder tree is its layer table (docs/architecture.md "Layers", issue 37): each
// top-level folder of packages/collector/src is one layer of packages/collector/layers.json, and
// a file imports only its own layer or the ones below it. This scan fails naming the file, the
// import and both layers when an import runs up the table, and on a top-level entry the table
// does not know (a new folder needs a row, in the order its imports allow).
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const here = path.dirname(fileURLToPath(import.meta.url));
const collector = path.resolve(here, "..");
const src = path.join(collector, "src");
const layers: string[] = (
  JSON.parse(readFileSync(path.join(collector, "layers.json"), "utf8")) as { layers: { folder: string }[] }
).layers.map((l) => l.folder);

/** Relative module specifiers of a file: import/export … from, bare import, import(). */
export function relativeSpecifiers(text: string): string[] {
  const found: string[] = [];
  for (const re of [/\bfrom\s*["'](\.{1,2}\/[^"']+)["']/g, /\bimport\s*\(?\s*["'](\.{1,2}\/[^"']+)["']/g])
    for (const m of text.matchAll(re)) found.push(m[1]!);
  return found;
}

/** The layer a path under src/ belongs to: its top-level folder's row (0 is the top). */
function layerOf(relToSrc: string): number {
  return layers.indexOf(relToSrc.split("/")[0]!);
}

/** Every import that runs up the table, as "file imports spec: layer A may not import layer B". */
export function upwardImports(files: { rel: string; text: string }[]): string[] {
  const problems: string[] = [];
  for (const { rel, text } of files)
    for (const spec of relativeSpecifiers(text)) {
      const target = path.posix.normalize(path.posix.join(path.posix.dirname(rel), spec));
      if (target.startsWith("..")) continue; // another package's path, not a layer
      const from = layerOf(rel);
      const to = layerOf(target);
      if (to < from) problems.push(`${rel} imports ${spec}: ${layers[from]}/ may not import ${layers[to]}/ (above it)`);
    }
  return problems;
}

function sourceFiles(): { rel: string; text: string }[] {
  const files: { rel: string; text: string }[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir).sort()) {
      const full = path.join(dir, name);
      if (statSync(full).isDirectory()) walk(full);
      else if (name.endsWith(".ts"))
        files.push({ rel: path.relative(src, full).split(path.sep).join("/"), text: readFileSync(full, "utf8") });
    }
  };
  walk(src);
  return files;
}

describe("the collector's layers", () => {
  it("every top-level entry of src/ is a folder of the layer table, at most 14 of them", () => {
    const entries = readdirSync(src).sort();
    const unknown = entries.filter((e) => !layers.includes(e) || !statSync(path.join(src, e)).isDirectory());
    expect(unknown).toEqual([]);
    expect(entries.length).toBeLessThanOrEqual(14);
  });

  it("no file imports a layer above its own", () => {
    const files = sourceFiles();
    expect(files.flatMap((f) => relativeSpecifiers(f.text)).length).toBeGreaterThan(300);
    expect(upwardImports(files)).toEqual([]);
  });

  it("the scan sees an upward import, an export-from and a dynamic import", () => {
    const top = layers[0]!;
    const bottom = layers[layers.length - 1]!;
    const text = [
      `import { x } from "../${top}/a.js";`,
      `export { y } from "../${top}/b.js";`,
      `const z = await import("../${top}/c.js");`,
      `import { ok } from "./d.js";`,
    ].join("\n");
    expect(upwardImports([{ rel: `${bottom}/e.ts`, text }])).toEqual([
      `${bottom}/e.ts imports ../${top}/a.js: ${bottom}/ may not import ${top}/ (above it)`,
      `${bottom}/e.ts imports ../${top}/b.js: ${bottom}/ may not import ${top}/ (above it)`,
      `${bottom}/e.ts imports ../${top}/c.js: ${bottom}/ may not import ${top}/ (above it)`,
    ]);
  });
});
