// No function in packages/*/src is over 120 lines (issue 37, "functions a person can read"). The
// scan is scripts/lib/function-lengths.mjs (the TypeScript parser; nested closures count in their
// function's length); `node scripts/function-lengths.mjs` lists the longest. It lives in the
// protocol package's tests because the rule spans every package and protocol is the one they
// all share. STILL_LONG names the functions not yet split: it may only shrink (a listed function
// that is now short fails too, so the list stays true).
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
// @ts-expect-error: a plain .mjs module of the repository's scripts, typed by use here
import { functionLengths, longFunctions, MAX_FUNCTION_LINES } from "../../../scripts/lib/function-lengths.mjs";

interface Measured {
  file: string;
  name: string;
  line: number;
  lines: number;
}

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");

/** "file name" of each function still over the limit, to be split (issue 37). */
const STILL_LONG: string[] = [];

describe("function lengths", () => {
  it(`no function in packages/*/src is over ${MAX_FUNCTION_LINES} lines`, () => {
    const long = (longFunctions(root) as Measured[]).map((f) => `${f.file} ${f.name}`);
    expect(long.filter((f) => !STILL_LONG.includes(f))).toEqual([]);
    expect(STILL_LONG.filter((f) => !long.includes(f))).toEqual([]);
  });

  it("measures functions, methods, arrows and nested closures by their whole span", () => {
    const text = [
      "export function outer(a: number): number {", // 1
      "  const inner = (b: number) => {", // 2
      "    return b + '}';", // 3
      "  };", // 4
      "  return inner(a);", // 5
      "}", // 6
      "class Box {", // 7
      "  get size() { return 1; }", // 8
      "  handle(x: string): void {", // 9
      "    // }", // 10
      "  }", // 11
      "}", // 12
    ].join("\n");
    const found = (functionLengths("f.ts", text) as Measured[]).map((f) => [f.name, f.line, f.lines]);
    expect(found).toEqual([
      ["outer", 1, 6],
      ["inner", 2, 3],
      ["Box.size", 8, 1],
      ["Box.handle", 9, 3],
    ]);
  });
});
