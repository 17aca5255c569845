// Function lengths in the packages' sources (issue 37, "functions a person can read"): every
// function, method, arrow and accessor under packages/*/src, measured from its first line to its
// last (a function's nested closures count in its length: what a reader must hold is the whole
// body). The TypeScript compiler parses, so strings and comments that look like braces do not
// fool it. Used by packages/protocol/test/function-lengths.test.ts (the pure tier) and by
// `node scripts/function-lengths.mjs` (prints the longest).
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import ts from "typescript";

/** The most lines a function in packages/*\/src may have. */
export const MAX_FUNCTION_LINES = 120;

/** A readable name for a function node: its own, its variable's, its property's, or its class's. */
function nameOf(node, sf) {
  const own = node.name && ts.isIdentifier(node.name) ? node.name.text : undefined;
  const parent = node.parent;
  let name = own;
  if (ts.isConstructorDeclaration(node)) name = "constructor";
  if (!name && parent && ts.isVariableDeclaration(parent) && ts.isIdentifier(parent.name)) name = parent.name.text;
  if (!name && parent && ts.isPropertyAssignment(parent)) name = parent.name.getText(sf);
  if (!name && parent && ts.isPropertyDeclaration(parent)) name = parent.name.getText(sf);
  if (!name && node.name) name = node.name.getText(sf);
  const cls = ts.isClassLike(parent) && parent.name ? `${parent.name.text}.` : "";
  return `${cls}${name ?? "(anonymous)"}`;
}

/** Every function in one file's text, with its name, first line and length in lines. */
export function functionLengths(fileName, text) {
  const sf = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const found = [];
  const visit = (node) => {
    if (ts.isFunctionLike(node) && "body" in node && node.body) {
      const start = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line;
      const end = sf.getLineAndCharacterOfPosition(node.getEnd()).line;
      found.push({ file: fileName, name: nameOf(node, sf), line: start + 1, lines: end - start + 1 });
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return found;
}

/** Every .ts file under the packages' src folders (generated code excluded), relative to root. */
export function packageSources(root) {
  const files = [];
  const walk = (dir) => {
    for (const name of readdirSync(dir).sort()) {
      const full = path.join(dir, name);
      if (name === "gen" || name === "node_modules") continue;
      if (statSync(full).isDirectory()) walk(full);
      else if (name.endsWith(".ts") && !name.endsWith(".d.ts")) files.push(path.relative(root, full));
    }
  };
  for (const pkg of readdirSync(path.join(root, "packages")).sort()) {
    const src = path.join(root, "packages", pkg, "src");
    try {
      if (statSync(src).isDirectory()) walk(src);
    } catch {
      // a package without src/
    }
  }
  return files;
}

/** Every function over `max` lines in the packages' sources, longest first. */
export function longFunctions(root, max = MAX_FUNCTION_LINES) {
  return packageSources(root)
    .flatMap((rel) => functionLengths(rel, readFileSync(path.join(root, rel), "utf8")))
    .filter((f) => f.lines > max)
    .sort((a, b) => b.lines - a.lines);
}
