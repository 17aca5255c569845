#!/usr/bin/env node
// Fails when packages/protocol/src/gen differs from what `npm run generate` makes of proto/.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const committed = path.join(root, "packages/protocol/src/gen");
const scratch = mkdtempSync(path.join(os.tmpdir(), "ws-gen-"));
try {
  const template = readFileSync(path.join(root, "buf.gen.yaml"), "utf8").replace(
    "out: packages/protocol/src/gen",
    `out: ${scratch}`,
  );
  const templatePath = path.join(scratch, "buf.gen.yaml");
  writeFileSync(templatePath, template);
  const format = spawnSync("npx", ["buf", "format", "-d", "--exit-code", "proto"], { cwd: root, encoding: "utf8" });
  if (format.status !== 0) {
    console.error(`proto/ is not buf-formatted; run npm run generate:\n${format.stdout}${format.stderr}`);
    process.exit(1);
  }
  const gen = spawnSync("npx", ["buf", "generate", "--template", templatePath], { cwd: root, encoding: "utf8" });
  if (gen.status !== 0) {
    console.error(gen.stdout + gen.stderr);
    process.exit(1);
  }
  const list = (dir) =>
    readdirSync(dir, { recursive: true })
      .filter((f) => f.endsWith(".ts"))
      .sort();
  const expected = list(scratch);
  const actual = list(committed);
  const stale = [];
  for (const file of new Set([...expected, ...actual])) {
    let a = "",
      b = "";
    try {
      a = readFileSync(path.join(scratch, file), "utf8");
    } catch {}
    try {
      b = readFileSync(path.join(committed, file), "utf8");
    } catch {}
    if (a !== b) stale.push(file);
  }
  if (stale.length) {
    console.error(`generated protocol code is stale (${stale.join(", ")}): run npm run generate and commit the result`);
    process.exit(1);
  }
  console.log(`generated code is fresh (${actual.length} files)`);
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
