// The agent's config is declared once (AGENT_CONFIG_SCHEMA): the shipped JSON Schema is what it
// derives (node scripts/config-schemas.mjs writes it), and the resolver reads no key the table
// lacks (an undeclared read throws; an unknown key in the file is reported).
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { jsonSchemaText } from "@ws/protocol";
import { describe, expect, it } from "vitest";
import { AGENT_CONFIG_SCHEMA, type ConfigError, resolveAgentConfig } from "../src/config.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");

describe("the agent's declared config", () => {
  it("ships packaging/schema/ws-agent.schema.json as the table derives it (node scripts/config-schemas.mjs)", () => {
    const shipped = readFileSync(path.join(root, "packaging/schema/ws-agent.schema.json"), "utf8");
    const id = (JSON.parse(shipped) as { $id: string }).$id;
    expect(JSON.parse(shipped)).toEqual(
      JSON.parse(jsonSchemaText(AGENT_CONFIG_SCHEMA, { id, title: "ws-agent config (/etc/ws-agent/config.yaml)" })),
    );
  });

  it("names the file, the key and what it expected, from the table", () => {
    let problems: readonly string[] = [];
    try {
      resolveAgentConfig({
        fileText: "gpu: { command: [nvidia-smi] }\nroots: proc\ndisk: { mounts: /data }\nvm: { namespace: true }\n",
        filePath: "/etc/ws-agent/config.yaml",
        env: {},
        flags: {},
        requireCollector: false,
      });
    } catch (error) {
      problems = (error as ConfigError).problems;
    }
    expect(problems).toEqual([
      "/etc/ws-agent/config.yaml: gpu.command: expected a string",
      "/etc/ws-agent/config.yaml: disk.mounts: expected a list of strings",
      '/etc/ws-agent/config.yaml: "roots" must be a mapping',
    ]);
  });

  it("declares every top-level key with a description, and closes the top level", () => {
    expect(AGENT_CONFIG_SCHEMA.closed).toBe(true);
    for (const [key, setting] of Object.entries(AGENT_CONFIG_SCHEMA.settings))
      expect(setting.description, key).not.toBe("");
  });
});
