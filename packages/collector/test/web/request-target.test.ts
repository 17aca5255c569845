// Request targets: origin-form paths parse under the collector's own host; anything else is not
// one of this server's targets (issue 23: "GET http://[::1 HTTP/1.1" ended the process).
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseRequestTarget } from "../../src/serve/router.js";

describe("parseRequestTarget", () => {
  it("parses origin-form targets, query included", () => {
    const url = parseRequestTarget("/keep/lab/alice-ws?t=k1.abc");
    expect(url?.pathname).toBe("/keep/lab/alice-ws");
    expect(url?.searchParams.get("t")).toBe("k1.abc");
    expect(parseRequestTarget("//[")?.pathname).toBe("//[");
    expect(parseRequestTarget("/%zz")?.pathname).toBe("/%zz");
  });

  it("refuses absolute-form, authority-form and asterisk targets", () => {
    for (const target of ["http://[::1", "http://a:99999/", "http://%zz/", "a:1", "*", "", undefined])
      expect(parseRequestTarget(target)).toBeUndefined();
  });

  it("never throws, and accepts every path the HTTP parser lets through (property)", () => {
    fc.assert(
      fc.property(fc.string(), (text) => {
        const url = parseRequestTarget(text);
        if (!text.startsWith("/")) expect(url).toBeUndefined();
      }),
    );
    // Printable ASCII without spaces is what a request line can carry: every such path parses.
    const pathChar = fc.integer({ min: 0x21, max: 0x7e }).map((code) => String.fromCharCode(code));
    fc.assert(
      fc.property(fc.array(pathChar, { maxLength: 60 }), (chars) => {
        expect(parseRequestTarget(`/${chars.join("")}`)).toBeInstanceOf(URL);
      }),
    );
  });
});
