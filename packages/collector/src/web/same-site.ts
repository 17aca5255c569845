// Whether a reference a collector hands a browser (a Location, a `next` to go back to) stays on the
// site that served it. Decided the way a browser decides: by the WHATWG URL parser, on the
// reference as it will be sent, never by a prefix check ("/\tevil.example/" starts with "/" and one
// slash, yet a browser strips the tab and goes to https://evil.example/: docs/security.md, "Where
// the fixed address sends the browser after Start").

/** A base no real site has: a reference that resolves off it resolves off any site. */
const BASE = new URL("https://same-site.invalid/base/page");

/** Longest reference kept (a path and query a person opened). */
export const MAX_REFERENCE_CHARS = 2048;

/**
 * `reference` when it is a path-absolute ("/…") or query-only ("?…") reference that a browser
 * resolves on the same origin, with nothing the URL parser would strip or rewrite (control
 * characters, spaces, backslashes, non-ASCII); undefined otherwise.
 */
export function sameSitePath(reference: string | null | undefined): string | undefined {
  if (typeof reference !== "string" || reference.length === 0 || reference.length > MAX_REFERENCE_CHARS)
    return undefined;
  // Printable ASCII only: tabs and newlines are removed by the parser, a backslash is a slash in
  // http(s) URLs, and a header cannot carry the rest. Percent-encodings stay as they are.
  if (!/^[\x21-\x5b\x5d-\x7e]+$/.test(reference)) return undefined;
  if (!(reference.startsWith("/") || reference.startsWith("?")) || reference.startsWith("//")) return undefined;
  try {
    return new URL(reference, BASE).origin === BASE.origin ? reference : undefined;
  } catch {
    return undefined;
  }
}
