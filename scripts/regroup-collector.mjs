#!/usr/bin/env node
// Regroups packages/collector/src (and its tests) into the layer folders of
// packages/collector/layers.json (issue 37), as a codemod rather than a hand-made move, so that
// it can be run again on a tree that changed meanwhile:
//
//   node scripts/regroup-collector.mjs            # move, rewrite, render the docs' layer table
//   node scripts/regroup-collector.mjs --dry-run  # print the moves, change nothing
//
// 1. Every file under packages/collector/{src,test} gets its new path from RULES below: a file
//    rule ("fleet.ts") names one file, a folder rule ("vm/") every file inside the folder, those
//    added later too. A path no rule covers (a new loose file, a new top-level folder) stops the
//    run before anything is changed, naming it: add a line here. Files already inside a layer
//    folder stay where they are, so a second run is a no-op.
// 2. The files move with `git mv` (plain rename for untracked ones).
// 3. In every tracked code file of the repository, each relative specifier (import/export from,
//    import(), vi.mock and friends, require, and the "../.." of lines that resolve a path from
//    import.meta.url or __dirname) that points at a moved file, or sits in a moved file, is
//    rewritten with TypeScript's resolution: "./x.js" names x.ts.
// 4. In every tracked text file, each mention "packages/collector/{src,test}/PATH" of a moved
//    path is rewritten; in Markdown, a backticked short form (`vm/step.ts`, `fleet.ts`, `kube/`)
//    that names a collector path and no guest-agent or protocol path; in the collector's own
//    comments, short forms relative to src/.
// 5. docs/architecture.md's layer table and CONTRIBUTING.md's collector row are rendered from
//    layers.json, and the changed code files go through `biome format`.
//
// Deterministic: files are visited in sorted order and nothing depends on time or the machine.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const SRC = "packages/collector/src";
const TEST = "packages/collector/test";
const SELF = "scripts/regroup-collector.mjs";
const LAYERS = JSON.parse(fs.readFileSync(path.join(ROOT, "packages/collector/layers.json"), "utf8")).layers;
const LAYER_FOLDERS = LAYERS.map((l) => l.folder);

/** Old path under packages/collector/src → new path. "x/" rules cover every file in folder x. */
export const SRC_RULES = {
  "main.ts": "cli/main.ts",
  "cli.ts": "cli/cli.ts",
  "serve.ts": "serve/serve.ts",
  "web/server.ts": "serve/router.ts",
  "replay/trace.ts": "loop/trace.ts",
  "replay/recorder.ts": "loop/recorder.ts",
  "replay/": "offline/replay/",
  "whatif/": "offline/whatif/",
  "config.ts": "platform/config.ts",
  "mode.ts": "platform/mode.ts",
  "kube/": "platform/kube/",
  "standalone/": "platform/standalone/",
  "start/token.ts": "links/start-token.ts",
  "start/": "comeback/start/",
  "keeplink/token.ts": "links/keep-token.ts",
  "keeplink/grant.ts": "loop/keep-grant.ts",
  "keeplink/": "comeback/keeplink/",
  "ssh-proxy/": "comeback/ssh-proxy/",
  "links/refusal.ts": "web/refusal.ts",
  "metrics.ts": "metrics/metrics.ts",
  "adoption-metrics.ts": "metrics/adoption-metrics.ts",
  "rollout/": "metrics/",
  "notify/stop-ends.ts": "loop/stop-ends.ts",
  "notify/": "outreach/notify/",
  "history/": "outreach/",
  "adoption/": "outreach/adoption/",
  "fleet.ts": "loop/fleet.ts",
  "vm/compact-report.ts": "model/compact-report.ts",
  "vm/": "loop/",
  "hostside/": "loop/hostside/",
  "token.ts": "links/agent-token.ts",
  "key-file.ts": "links/key-file.ts",
  "policy-source.ts": "model/policy-source.ts",
  "stats.ts": "lib/stats.ts",
  "retry.ts": "lib/retry.ts",
  "log-budget.ts": "lib/log-budget.ts",
  "version.ts": "lib/version.ts",
  "memory/": "lib/memory/",
};

/** Old path under packages/collector/test → new path: the tests mirror the source tree. */
export const TEST_RULES = {
  "layers.test.ts": "layers.test.ts",
  "fixtures/": "fixtures/",
  "agent-versions.test.ts": "metrics/agent-versions.test.ts",
  "config-scale.test.ts": "platform/config-scale.test.ts",
  "config-interval.test.ts": "platform/config-interval.test.ts",
  "config-way-back.test.ts": "platform/config-way-back.test.ts",
  "events.test.ts": "engine/events.test.ts",
  "given-back.test.ts": "outreach/adoption/given-back.test.ts",
  "metrics.test.ts": "metrics/metrics.test.ts",
  "token.test.ts": "links/agent-token.test.ts",
  "validate.test.ts": "agents/validate.test.ts",
  "whatif-readings.test.ts": "offline/whatif/whatif-readings.test.ts",
  "whatif.test.ts": "offline/whatif/whatif.test.ts",
  "whatif-sweep.test.ts": "offline/whatif/whatif-sweep.test.ts",
  "keeplink/token.test.ts": "links/keep-token.test.ts",
  "vm/compact-report.test.ts": "model/compact-report.test.ts",
  // Every other test folder goes where its source folder went.
  ...Object.fromEntries(Object.entries(SRC_RULES).filter(([from]) => from.endsWith("/"))),
};

const dryRun = process.argv.includes("--dry-run");

function git(...args) {
  return execFileSync("git", args, { cwd: ROOT, encoding: "utf8", maxBuffer: 1 << 28 });
}

/** The rule that covers rel (exact file rule, else the longest folder rule), or undefined. */
function ruleFor(rules, rel) {
  if (Object.hasOwn(rules, rel) && !rel.endsWith("/")) return [rel, rules[rel]];
  let best;
  for (const [from, to] of Object.entries(rules))
    if (from.endsWith("/") && (rel.startsWith(from) || `${rel}/` === from) && (!best || from.length > best[0].length))
      best = [from, to];
  return best;
}

/** New path of rel (a file or a folder) under one of the two trees; rel itself when nothing moves it. */
function mapIn(rules, rel) {
  const top = rel.split("/")[0];
  const rule = ruleFor(rules, rel);
  // A path inside a layer folder is in place, unless a rule names it (web/server.ts, links/refusal.ts).
  if (!rule) return rel;
  const [from, to] = rule;
  if (!from.endsWith("/")) return to;
  if (`${rel}/` === from) return to.replace(/\/$/, "") || top;
  return to + rel.slice(from.length);
}

/** The new repository path of an old repository path (a file or a folder). */
export function mapRepoPath(p) {
  if (p.startsWith(`${SRC}/`)) return `${SRC}/${mapIn(SRC_RULES, p.slice(SRC.length + 1))}`;
  if (p.startsWith(`${TEST}/`)) return `${TEST}/${mapIn(TEST_RULES, p.slice(TEST.length + 1))}`;
  return p;
}

const exists = (p) => fs.existsSync(path.join(ROOT, p));
const isFile = (p) => exists(p) && fs.statSync(path.join(ROOT, p)).isFile();
const toPosix = (p) => p.split(path.sep).join("/");

// ---- 1. plan the moves --------------------------------------------------------------------
const listed = git("ls-files", "-co", "--exclude-standard", "-z")
  .split("\0")
  .filter(Boolean)
  .filter((p) => isFile(p))
  .sort();
const tracked = new Set(git("ls-files", "-z").split("\0").filter(Boolean));

const uncovered = [];
const moves = new Map(); // old repo path -> new repo path
for (const p of listed) {
  for (const [tree, rules, allowedLoose] of [
    [SRC, SRC_RULES, []],
    [TEST, TEST_RULES, ["layers.test.ts"]],
  ]) {
    if (!p.startsWith(`${tree}/`)) continue;
    const rel = p.slice(tree.length + 1);
    const top = rel.split("/")[0];
    const inLayer = rel.includes("/") && (LAYER_FOLDERS.includes(top) || (tree === TEST && top === "fixtures"));
    if (!ruleFor(rules, rel) && !inLayer && !allowedLoose.includes(rel)) uncovered.push(p);
    const to = mapRepoPath(p);
    if (to !== p) moves.set(p, to);
  }
}
if (uncovered.length > 0) {
  console.error(
    `regroup-collector: no rule covers these paths; add a line to SRC_RULES or TEST_RULES in ${SELF}:\n` +
      uncovered.map((p) => `  ${p}`).join("\n"),
  );
  process.exit(1);
}
const targets = new Map();
for (const [from, to] of moves) {
  if (targets.has(to)) throw new Error(`regroup-collector: ${from} and ${targets.get(to)} would both become ${to}`);
  if (isFile(to) && !moves.has(to)) throw new Error(`regroup-collector: ${from} would overwrite ${to}`);
  if (mapRepoPath(to) !== to) throw new Error(`regroup-collector: ${to} (from ${from}) would move again on a rerun`);
  targets.set(to, from);
}
if (dryRun) {
  for (const [from, to] of moves) console.log(`${from} -> ${to}`);
  console.log(`${moves.size} files would move`);
  process.exit(0);
}

// ---- 3/4. rewrite contents (computed against the old tree, written after the moves) ---------
const CODE = /\.(ts|mts|cts|mjs|cjs|js|tsx)$/;
const newPathOf = (p) => moves.get(p) ?? p;

/** The existing old path a relative reference from file resolves to, and how to spell it back. */
function resolveReference(fromFile, spec) {
  const abs = toPosix(path.posix.normalize(path.posix.join(path.posix.dirname(fromFile), spec)));
  if (abs.startsWith("..")) return undefined;
  const trail = spec.endsWith("/") ? "/" : "";
  const bare = abs.replace(/\/$/, "");
  const candidates = [];
  // TypeScript's rule for ES modules: "./x.js" names x.ts (and x.js if that is what exists).
  if (/\.js$/.test(bare)) candidates.push([bare.replace(/\.js$/, ".ts"), (p) => p.replace(/\.ts$/, ".js")]);
  if (/\.mjs$/.test(bare)) candidates.push([bare.replace(/\.mjs$/, ".mts"), (p) => p.replace(/\.mts$/, ".mjs")]);
  candidates.push([bare, (p) => p]);
  for (const [candidate, spell] of candidates) {
    const target = candidate === "" ? "." : candidate;
    if (exists(target)) return { target, spell, trail };
  }
  return undefined;
}

function rewriteSpec(fromFile, spec) {
  const found = resolveReference(fromFile, spec);
  if (!found) return spec;
  const newFrom = newPathOf(fromFile);
  const newTarget = found.target === "." ? "." : mapRepoPath(found.target);
  if (newFrom === fromFile && newTarget === found.target) return spec;
  let rel = path.posix.relative(path.posix.dirname(newFrom), found.spell(newTarget)) || ".";
  if (!rel.startsWith(".")) rel = `./${rel}`;
  if (spec.startsWith("./") && rel === ".") rel = "./";
  return rel + (found.trail && !rel.endsWith("/") ? found.trail : "");
}

const SPEC_PATTERNS = [
  /(\bfrom\s*)(["'])(\.{1,2}\/[^"'\n]*)\2/g,
  /(\bimport\s*\(\s*)(["'])(\.{1,2}\/[^"'\n]*)\2/g,
  /(\bimport\s+)(["'])(\.{1,2}\/[^"'\n]*)\2/g,
  /(\bvi\.(?:mock|doMock|unmock|doUnmock|importActual|importMock)\(\s*)(["'])(\.{1,2}\/[^"'\n]*)\2/g,
  /(\brequire\(\s*)(["'])(\.{1,2}\/[^"'\n]*)\2/g,
];
/** On a line that resolves a path from the file's own place, every relative literal is a path. */
const PATH_LINE = /import\.meta\.url|__dirname|\bdirname\(/;
const PATH_LITERAL = /()(["'`])(\.{1,2}(?:\/[^"'`\n]*)?)\2/g;

function rewriteCode(file, text) {
  let out = text;
  for (const re of SPEC_PATTERNS)
    out = out.replace(re, (_m, pre, q, spec) => `${pre}${q}${rewriteSpec(file, spec)}${q}`);
  out = out
    .split("\n")
    .map((line) =>
      PATH_LINE.test(line)
        ? line.replace(PATH_LITERAL, (m, pre, q, spec) =>
            /^\.{1,2}(\/\.\.)*\/?$/.test(spec) || spec.includes("/") ? `${pre}${q}${rewriteSpec(file, spec)}${q}` : m,
          )
        : line,
    )
    .join("\n");
  return out;
}

/** packages/collector/{src,test}/PATH mentions, with or without the extension TypeScript drops. */
const FULL_MENTION = /(packages\/collector\/(?:src|test)\/[A-Za-z0-9_./-]*[A-Za-z0-9_])/g;
function mapMention(p) {
  if (/\.js$/.test(p) && exists(p.replace(/\.js$/, ".ts")))
    return mapRepoPath(p.replace(/\.js$/, ".ts")).replace(/\.ts$/, ".js");
  return exists(p) ? mapRepoPath(p) : p;
}

const OTHER_TREES = ["packages/guest-agent/src", "packages/protocol/src"];
const ambiguous = (short) => OTHER_TREES.some((tree) => exists(`${tree}/${short.replace(/\/$/, "")}`));
/** A short form relative to the collector's src/: a file or a folder the rules move. */
function mapShort(short, { checkAmbiguity }) {
  const full = `${SRC}/${short.replace(/\/$/, "")}`;
  if (!exists(full)) return short;
  if (checkAmbiguity && ambiguous(short)) return short;
  const mapped = mapRepoPath(full).slice(SRC.length + 1);
  if (short.endsWith("/")) {
    if (!fs.statSync(path.join(ROOT, full)).isDirectory()) return short;
    // A one-file folder poured into a layer (history/ into outreach/) is named by its file.
    const inside = fs.readdirSync(path.join(ROOT, full));
    if (!mapped.includes("/") && inside.length === 1) return mapShort(`${short}${inside[0]}`, { checkAmbiguity });
    return `${mapped}/`;
  }
  return mapped;
}

const SHORT_IN_BACKTICKS = /`([a-z][a-z0-9-]*(?:\/[a-z][a-z0-9.-]*)*(?:\.ts|\/))`/g;
const SHORT_IN_COMMENT = /(?<![\w/.@-])((?:[a-z][a-z0-9-]*\/)+[a-z][a-z0-9.-]*\.ts|[a-z][a-z0-9-]*\.ts)(?![\w/])/g;
const SHORT_WITH_FOLDER = /(?<![\w/.@-])(?:[a-z][a-z0-9-]*\/)+[a-z][a-z0-9.-]*\.ts(?![\w/])/g;
const COMMENT_LINE = /^\s*(\/\/|\/\*|\*)/;

function rewriteText(file, text) {
  let out = text.replace(FULL_MENTION, (m) => mapMention(m));
  const inCollector = file.startsWith(`${SRC}/`) || file.startsWith(`${TEST}/`);
  if (file.endsWith(".md")) {
    // "folder/file.ts" anywhere; a bare "file.ts" or a "folder/" only in backticks.
    out = out.replace(SHORT_WITH_FOLDER, (m) => mapShort(m, { checkAmbiguity: true }));
    out = out.replace(SHORT_IN_BACKTICKS, (_m, short) => `\`${mapShort(short, { checkAmbiguity: true })}\``);
  }
  if (CODE.test(file) && !inCollector)
    out = out
      .split("\n")
      .map((line) => {
        const at = line.search(/\/\/|\/\*|^\s*\*/);
        if (at < 0 || !COMMENT_LINE.test(line.slice(at))) return line;
        return (
          line.slice(0, at) + line.slice(at).replace(SHORT_WITH_FOLDER, (m) => mapShort(m, { checkAmbiguity: true }))
        );
      })
      .join("\n");
  if (CODE.test(file) && inCollector)
    out = out
      .split("\n")
      .map((line) => {
        const at = line.search(/\/\/|\/\*|^\s*\*/);
        if (at < 0 || !COMMENT_LINE.test(line.slice(at))) return line;
        // A bare name ("fleet.ts") is read as src-relative only in a file at the top of its tree;
        // deeper, "metrics.ts" in hostside/ means hostside/metrics.ts.
        const atTop = !file.slice(file.startsWith(SRC) ? SRC.length + 1 : TEST.length + 1).includes("/");
        return (
          line.slice(0, at) +
          line
            .slice(at)
            .replace(SHORT_IN_COMMENT, (m) => (m.includes("/") || atTop ? mapShort(m, { checkAmbiguity: false }) : m))
        );
      })
      .join("\n");
  return out;
}

const TEXT = /\.(ts|mts|cts|mjs|cjs|js|tsx|md|json|ya?ml|sh|txt)$/;
const rewritten = new Map(); // new path -> content
for (const file of listed) {
  if (file === SELF || file === "package-lock.json" || !TEXT.test(file)) continue;
  if (file.startsWith("packages/protocol/src/gen/")) continue;
  const before = fs.readFileSync(path.join(ROOT, file), "utf8");
  let after = CODE.test(file) ? rewriteCode(file, before) : before;
  after = rewriteText(file, after);
  if (after !== before) rewritten.set(newPathOf(file), after);
}

// ---- 5. the docs' layer table, from layers.json --------------------------------------------
function renderLayers(text) {
  const heading = text.indexOf("\n## Layers\n");
  if (heading < 0) throw new Error("regroup-collector: docs/architecture.md has no '## Layers' section");
  const start = text.indexOf("\n|", heading);
  let end = start + 1;
  while (text.startsWith("|", end)) end = text.indexOf("\n", end) + 1;
  const table = [
    "| layer (top to bottom) | holds |",
    "|---|---|",
    ...LAYERS.map((l) => `| \`${l.folder}/\` | ${l.holds} |`),
    "| `@ws/protocol` | the contract, gRPC adapter, `backoffDelayMs`, logging (imports nothing of ws) |",
    "",
  ].join("\n");
  return `${text.slice(0, start + 1)}${table}${text.slice(end)}`;
}
function renderContributingRow(text) {
  const row = `| \`packages/collector\` | \`ws-collector\`, one folder of \`src/\` per layer, top to bottom: ${LAYERS.map((l) => `\`${l.folder}/\``).join(", ")}. docs/architecture.md's "Layers" says what each holds; \`packages/collector/test/layers.test.ts\` fails on an import up the table; \`test/\` mirrors \`src/\` |`;
  return text.replace(/^\| `packages\/collector` \|.*$/m, row);
}
for (const [file, render] of [
  ["docs/architecture.md", renderLayers],
  ["CONTRIBUTING.md", renderContributingRow],
]) {
  const text = rewritten.get(file) ?? fs.readFileSync(path.join(ROOT, file), "utf8");
  const after = render(text);
  if (after !== fs.readFileSync(path.join(ROOT, file), "utf8")) rewritten.set(file, after);
  else rewritten.delete(file);
}

// ---- 2. move, then write ------------------------------------------------------------------
for (const [from, to] of moves) {
  fs.mkdirSync(path.dirname(path.join(ROOT, to)), { recursive: true });
  if (tracked.has(from)) git("mv", from, to);
  else fs.renameSync(path.join(ROOT, from), path.join(ROOT, to));
}
for (const [file, text] of [...rewritten].sort(([a], [b]) => (a < b ? -1 : 1)))
  fs.writeFileSync(path.join(ROOT, file), text);
// Folders the moves emptied.
for (const tree of [SRC, TEST]) {
  const prune = (dir) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) if (e.isDirectory()) prune(path.join(dir, e.name));
    if (dir !== path.join(ROOT, tree) && fs.readdirSync(dir).length === 0) fs.rmdirSync(dir);
  };
  prune(path.join(ROOT, tree));
}
// Longer paths can push an import past the line width: the project's formatter, on what changed.
const formatted = [...rewritten.keys()].filter((f) => CODE.test(f)).sort();
if (formatted.length > 0)
  execFileSync(path.join(ROOT, "node_modules/.bin/biome"), ["format", "--write", ...formatted], {
    cwd: ROOT,
    stdio: "ignore",
  });
console.log(`regroup-collector: moved ${moves.size} files, rewrote ${rewritten.size}`);
