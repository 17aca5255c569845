/**
 * The two field guides' own objects (test/fixtures/field-guides/), as written: every
 * VirtualMachine, DataVolume and related object, verbatim from the guides, one file each with a
 * comment saying where it came from. Tests read them through here so that no test keeps a copy.
 */
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parse as parseYaml } from "yaml";

export const FIELD_GUIDES_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../fixtures/field-guides");

export type GuideName = "single-node-desktop" | "ceph-rbd-gpu";

export interface GuideObject {
  guide: GuideName;
  /** The fixture's file name, e.g. "tinycore-desktop.vm.yaml". */
  file: string;
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec?: Record<string, unknown>;
  [key: string]: unknown;
}

/** Every object of one guide (or both), in file-name order. */
export function fieldGuideObjects(guide?: GuideName): GuideObject[] {
  const guides: GuideName[] = guide ? [guide] : ["single-node-desktop", "ceph-rbd-gpu"];
  const out: GuideObject[] = [];
  for (const g of guides) {
    const dir = path.join(FIELD_GUIDES_DIR, g);
    for (const file of readdirSync(dir)
      .filter((f) => f.endsWith(".yaml"))
      .sort()) {
      const parsed = parseYaml(readFileSync(path.join(dir, file), "utf8")) as Partial<GuideObject> | null;
      if (!parsed?.kind || !parsed.apiVersion || !parsed.metadata?.name)
        throw new Error(`${g}/${file}: not a Kubernetes object`);
      out.push({
        ...parsed,
        apiVersion: parsed.apiVersion,
        kind: parsed.kind,
        metadata: parsed.metadata,
        guide: g,
        file,
      });
    }
  }
  return out;
}

/** One object by kind and name; a deep copy, so a test may change it. */
export function fieldGuideObject(kind: string, name: string): GuideObject {
  const found = fieldGuideObjects().find((o) => o.kind === kind && o.metadata.name === name);
  if (!found) throw new Error(`no ${kind} ${name} in test/fixtures/field-guides`);
  return structuredClone(found);
}
