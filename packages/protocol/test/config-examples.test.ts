// README's example config files use only declared keys: every key of the agent's and the
// collector's example is in its program's table (AGENT_CONFIG_SCHEMA, COLLECTOR_CONFIG_SCHEMA),
// down to the sections other modules parse, so the shipped JSON Schemas describe what people
// copy. (Unknown keys inside a section are not refused at run time; this keeps the table whole.)
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { AGENT_CONFIG_SCHEMA } from "../../guest-agent/src/config.js";
import { COLLECTOR_CONFIG_SCHEMA } from "../../collector/src/platform/config.js";
import { isJsonObject, type SectionSetting, type Setting } from "../src/index.js";

const readme = readFileSync(path.join(path.dirname(fileURLToPath(import.meta.url)), "../../../README.md"), "utf8");

/** The first ```yaml block after a heading. */
function exampleAfter(heading: string): unknown {
  const from = readme.indexOf(heading);
  const start = readme.indexOf("```yaml\n", from) + "```yaml\n".length;
  return parse(readme.slice(start, readme.indexOf("```", start)));
}

/** Dotted paths of the example's keys the table does not declare (a map or a section parsed elsewhere: not looked into). */
function undeclared(setting: Setting, value: unknown, at: string): string[] {
  if (setting.type !== "section" || !isJsonObject(value)) return [];
  return Object.entries(value).flatMap(([key, child]) => {
    const declared = setting.settings[key];
    return declared ? undeclared(declared, child, `${at}${key}.`) : [`${at}${key}`];
  });
}

describe("README's example config files", () => {
  for (const [name, heading, schema] of [
    ["ws-agent", "### Agent: `/etc/ws-agent/config.yaml`", AGENT_CONFIG_SCHEMA],
    ["ws-collector", "### Collector: `/etc/ws-collector/config.yaml`", COLLECTOR_CONFIG_SCHEMA],
  ] as [string, string, SectionSetting][])
    it(`${name}'s uses only keys its table declares`, () => {
      const example = exampleAfter(heading);
      expect(isJsonObject(example) && Object.keys(example).length).toBeGreaterThan(5);
      expect(undeclared(schema, example, "")).toEqual([]);
    });
});
