#!/usr/bin/env node
// `node scripts/function-lengths.mjs [MAX]`: the functions in packages/*/src longer than MAX lines
// (default: the limit the pure tier enforces), longest first. Exits 1 when there are any.
import path from "node:path";
import { fileURLToPath } from "node:url";
import { longFunctions, MAX_FUNCTION_LINES } from "./lib/function-lengths.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const max = Number(process.argv[2] ?? MAX_FUNCTION_LINES);
const long = longFunctions(root, max);
for (const f of long) console.log(`${String(f.lines).padStart(4)}  ${f.file}:${f.line}  ${f.name}`);
process.exit(long.length > 0 ? 1 : 0);
