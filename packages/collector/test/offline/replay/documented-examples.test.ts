// Every replay shown in the docs (outside docs/replay.md, which command.test.ts checks) is the
// real output of `ws-collector replay` on the trace it names: the traces in docs/examples are
// the rules of docs/policy.md and docs/signals/*.md, replayed.
import { readdir, readFile } from "node:fs/promises";
import { sink } from "./sink.js";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { replayCommand } from "../../../src/offline/replay/command.js";

const ROOT = fileURLToPath(new URL("../../../../../", import.meta.url));
const BLOCK =
  /<!-- replay-output:start[^>]*-->\n```\n\$ ws-collector replay ([^\n]*)\n([\s\S]*?)```\n<!-- replay-output:end -->/g;

async function documentedBlocks(): Promise<Array<{ doc: string; argv: string[]; expected: string }>> {
  const docs = [
    "docs/policy.md",
    ...(await readdir(`${ROOT}docs/signals`))
      .filter((name) => name.endsWith(".md"))
      .map((name) => `docs/signals/${name}`),
  ];
  const blocks: Array<{ doc: string; argv: string[]; expected: string }> = [];
  for (const doc of docs) {
    const text = await readFile(`${ROOT}${doc}`, "utf8");
    for (const match of text.matchAll(BLOCK)) blocks.push({ doc, argv: match[1]!.split(" "), expected: match[2]! });
  }
  return blocks;
}

describe("replays shown in the docs", async () => {
  const blocks = await documentedBlocks();

  it("covers each new rule's trace", () => {
    expect(blocks.map((block) => block.argv.at(-1)).sort()).toEqual([
      "docs/examples/agent-gone.trace.jsonl",
      "docs/examples/desktop.trace.jsonl",
      "docs/examples/forward-jupyter.trace.jsonl",
      "docs/examples/jupyter-terminal.trace.jsonl",
      "docs/examples/reload-page.trace.jsonl",
      "docs/examples/remote-session.trace.jsonl",
      "docs/examples/unattended-max.trace.jsonl",
    ]);
  });

  for (const block of blocks) {
    it(`${block.doc}: ws-collector replay ${block.argv.join(" ")}`, async () => {
      const stdout = sink();
      const stderr = sink();
      const code = await replayCommand(block.argv, {
        stdout,
        stderr,
        readFile: (path) => readFile(path.startsWith("/") ? path : `${ROOT}${path}`, "utf8"),
      });
      expect(stderr.text).toBe("");
      expect(code).toBe(0);
      expect(stdout.text).toBe(block.expected);
    });
  }
});
