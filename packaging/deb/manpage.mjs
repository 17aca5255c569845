// Man pages made from the commands' own --help texts, so the two never disagree. Pure: the
// build script runs the bundle for the texts and writes the result.
//
// Two shapes of help text are understood:
//   - man-page shaped (ws-lease): NAME, SYNOPSIS, ... headings in capitals at column 0, bodies
//     indented by four spaces;
//   - usage shaped (ws-agent): "name version — what it is", "Usage: ...", then free text.
// Bodies are kept as laid out (no-fill), which is how the texts were written to be read.

/** Escapes text for a roff no-fill line: backslashes, ASCII minus for options, control lines. */
export function roffEscape(text) {
  const escaped = text.replace(/\\/g, "\\e").replace(/-/g, "\\-");
  return /^[.']/.test(escaped) ? `\\&${escaped}` : escaped;
}

const HEADING = /^[A-Z][A-Z ]*[A-Z]$/;

/** Splits a man-page shaped help text into its sections; null when it is not one. */
export function splitSections(help) {
  const lines = help.replace(/\s+$/, "").split("\n");
  if (lines[0]?.trim() !== "NAME") return null;
  const sections = [];
  for (const line of lines) {
    if (HEADING.test(line)) sections.push({ title: line, lines: [] });
    else sections.at(-1).lines.push(line);
  }
  for (const section of sections) section.lines = dedent(trimBlankEdges(section.lines));
  return sections;
}

/** Reads a usage shaped help text: its one-line summary, its usage lines and the rest. */
export function splitUsage(help) {
  const lines = trimBlankEdges(help.replace(/\s+$/, "").split("\n"));
  const usageAt = lines.findIndex((line) => line.startsWith("Usage:"));
  if (usageAt < 0) throw new Error(`help text has neither a NAME section nor a "Usage:" line:\n${help}`);
  const synopsis = [lines[usageAt].slice("Usage:".length).trim()];
  let next = usageAt + 1;
  while (next < lines.length && /^\s+\S/.test(lines[next]) && !/^\s*$/.test(lines[next]))
    synopsis.push(lines[next++].trim());
  const summary = usageAt > 0 ? trimBlankEdges(lines.slice(0, usageAt)).join(" ") : "";
  return { summary, synopsis, body: trimBlankEdges(lines.slice(next)) };
}

function trimBlankEdges(lines) {
  let start = 0;
  let end = lines.length;
  while (start < end && lines[start].trim() === "") start++;
  while (end > start && lines[end - 1].trim() === "") end--;
  return lines.slice(start, end);
}

function dedent(lines) {
  const indents = lines.filter((l) => l.trim() !== "").map((l) => /^ */.exec(l)[0].length);
  const cut = indents.length ? Math.min(...indents) : 0;
  return lines.map((l) => l.slice(cut));
}

function noFill(lines) {
  return [".nf", ...lines.map((line) => (line.trim() === "" ? "" : roffEscape(line))), ".fi"];
}

/** "ws-agent 0.1.0 — the in-guest agent of ws (...)" → "the in-guest agent of ws (...)". */
function describedAs(summary, name) {
  const match = /^\S+(?:\s+v?\d[\w.+-]*)?\s+[—–-]+\s+(.*)$/.exec(summary);
  if (!match) throw new Error(`cannot read "${name} — description" from "${summary}"`);
  return match[1];
}

/**
 * @param {{ name: string, section: number, date: string, source: string, manual: string,
 *   help: string, commands?: { name: string, help: string }[], seeAlso?: string[] }} page
 * @returns {string} the page, in roff (man macros)
 */
export function helpToMan(page) {
  const out = [
    `.\\" Generated from '${page.name} --help' by packaging/deb/manpage.mjs; edit the help text, not this.`,
    `.TH ${page.name.toUpperCase()} ${page.section} "${page.date}" "${page.source}" "${page.manual}"`,
  ];
  const sections = splitSections(page.help);
  if (sections) {
    for (const section of sections) {
      out.push(`.SH ${section.title}`);
      if (section.title === "NAME") out.push(nameLine(section.lines.join(" ")));
      else out.push(...noFill(section.lines));
    }
  } else {
    const usage = splitUsage(page.help);
    out.push(".SH NAME", `${roffEscape(page.name)} \\- ${roffEscape(describedAs(usage.summary, page.name))}`);
    out.push(".SH SYNOPSIS", ...noFill(usage.synopsis));
    if (usage.body.length) out.push(".SH DESCRIPTION", ...noFill(usage.body));
  }
  if (page.commands?.length) {
    out.push(".SH COMMANDS");
    for (const command of page.commands) {
      out.push(
        `.SS ${roffEscape(`${page.name} ${command.name}`)}`,
        ...noFill(trimBlankEdges(command.help.replace(/\s+$/, "").split("\n"))),
      );
    }
  }
  if (page.seeAlso?.length && !sections?.some((s) => s.title === "SEE ALSO")) {
    out.push(".SH SEE ALSO", page.seeAlso.map((ref) => roffEscape(ref)).join(", "));
  }
  return `${out.join("\n")}\n`;
}

/** NAME must read "name \- what it is" for mandb/whatis. */
function nameLine(text) {
  const match = /^(\S+)\s+[—–-]+\s+(.*)$/.exec(text.trim());
  if (!match) throw new Error(`NAME section must read "name - description", got "${text}"`);
  return `${roffEscape(match[1])} \\- ${roffEscape(match[2])}`;
}
