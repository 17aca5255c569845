// The collector's config is declared once (COLLECTOR_CONFIG_SCHEMA): the shipped JSON Schema is
// what it derives (node scripts/config-schemas.mjs writes it), and its checks speak from the table.
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { jsonSchemaText, settingAt } from "@ws/protocol";
import { describe, expect, it } from "vitest";
import {
  COLLECTOR_CONFIG_SCHEMA,
  type CollectorConfigError,
  resolveCollectorConfig,
} from "../../src/platform/config.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../..");

function problemsOf(text: string): readonly string[] {
  try {
    resolveCollectorConfig(text, "collector.yaml", {}, {});
  } catch (error) {
    return (error as CollectorConfigError).problems;
  }
  return [];
}

describe("the collector's declared config", () => {
  it("ships packaging/schema/ws-collector.schema.json as the table derives it (node scripts/config-schemas.mjs)", () => {
    const shipped = readFileSync(path.join(root, "packaging/schema/ws-collector.schema.json"), "utf8");
    const id = (JSON.parse(shipped) as { $id: string }).$id;
    expect(JSON.parse(shipped)).toEqual(
      JSON.parse(jsonSchemaText(COLLECTOR_CONFIG_SCHEMA, { id, title: "ws-collector config" })),
    );
  });

  it("refuses an unknown key, a section that is not a mapping and a wrong type, naming the file and the key", () => {
    expect(problemsOf("grpc: 7443\nkubernetes: { leaseName: [a] }\nlisten: 1\n")).toEqual([
      'collector.yaml: unknown setting "listen" (known: mode, grpc, http, tokenKeyFile, reportInterval, reportHeartbeat, tick, standalone, kubernetes, policy, recordTrace, notifications, start, hostSide, dormant, prices, metrics, memory)',
      'collector.yaml: "grpc" must be a mapping',
      "collector.yaml: kubernetes.leaseName: expected a string",
    ]);
  });

  it("takes a range's refusal from the table", () => {
    expect(problemsOf("grpc: { hellosPerSecond: 0 }\n")).toEqual([
      "collector.yaml: grpc.hellosPerSecond: expected a number from 1 to 1000000, not 0",
    ]);
    const declared = settingAt(COLLECTOR_CONFIG_SCHEMA, "grpc.maxConnections");
    expect(declared).toMatchObject({ type: "integer", minimum: 1, maximum: 1_048_576 });
  });
});
