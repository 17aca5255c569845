#!/usr/bin/env node
// `node scripts/config-schemas.mjs`: writes packaging/schema/ws-agent.schema.json and
// ws-collector.schema.json from the declared config tables (AGENT_CONFIG_SCHEMA in
// packages/guest-agent/src/config.ts, COLLECTOR_CONFIG_SCHEMA in packages/collector/src/platform/config.ts).
// The pure tier's config-schema tests fail when a file does not say what this would write.
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { build } from "esbuild";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export const SCHEMAS = [
  {
    file: "packaging/schema/ws-agent.schema.json",
    id: "https://raw.githubusercontent.com/aik8s/ws/main/packaging/schema/ws-agent.schema.json",
    title: "ws-agent config (/etc/ws-agent/config.yaml)",
  },
  {
    file: "packaging/schema/ws-collector.schema.json",
    id: "https://raw.githubusercontent.com/aik8s/ws/main/packaging/schema/ws-collector.schema.json",
    title: "ws-collector config",
  },
];

const dir = mkdtempSync(path.join(os.tmpdir(), "ws-config-schemas-"));
try {
  const out = path.join(dir, "schemas.mjs");
  await build({
    stdin: {
      contents: [
        'export { jsonSchemaText } from "./packages/protocol/src/config-schema.ts";',
        'export { AGENT_CONFIG_SCHEMA } from "./packages/guest-agent/src/config.ts";',
        'export { COLLECTOR_CONFIG_SCHEMA } from "./packages/collector/src/platform/config.ts";',
      ].join("\n"),
      resolveDir: root,
      loader: "ts",
    },
    bundle: true,
    platform: "node",
    format: "esm",
    outfile: out,
    logLevel: "error",
    banner: { js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);" },
  });
  const built = await import(pathToFileURL(out).href);
  const [agent, collector] = SCHEMAS;
  for (const [meta, schema] of [
    [agent, built.AGENT_CONFIG_SCHEMA],
    [collector, built.COLLECTOR_CONFIG_SCHEMA],
  ]) {
    writeFileSync(path.join(root, meta.file), built.jsonSchemaText(schema, { id: meta.id, title: meta.title }));
    console.log(`wrote ${meta.file}`);
  }
  // In the repository's JSON style, so that `biome check .` stays clean.
  const files = SCHEMAS.map((meta) => meta.file);
  const biome = spawnSync(path.join(root, "node_modules/.bin/biome"), ["format", "--write", ...files], {
    cwd: root,
    stdio: "inherit",
  });
  if (biome.status !== 0) process.exitCode = 1;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
