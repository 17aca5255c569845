// The warnings the collector logs at start about what its HTTP side exposes (issue 34: /metrics
// on the pages' port needed no identity, and nothing said so).
import { describe, expect, it } from "vitest";
import { httpExposureWarnings } from "../../src/web/exposure.js";

describe("httpExposureWarnings", () => {
  it("/metrics on the pages' port is named, behind a login or in Kubernetes mode", () => {
    const metrics = /^\/metrics open on http\.listen: it needs no identity/;
    expect(httpExposureWarnings({ mode: "standalone", identity: true, metricsListen: false })).toEqual([
      expect.stringMatching(metrics),
    ]);
    expect(httpExposureWarnings({ mode: "kubernetes", identity: true, metricsListen: false })).toEqual([
      expect.stringMatching(metrics),
    ]);
    expect(httpExposureWarnings({ mode: "kubernetes", identity: false, metricsListen: false })).toEqual([
      expect.stringMatching(/^pages open:/),
      expect.stringMatching(metrics),
    ]);
  });

  it("nothing to say with its own port and a login, or standalone on a trusted network", () => {
    expect(httpExposureWarnings({ mode: "kubernetes", identity: true, metricsListen: true })).toEqual([]);
    expect(httpExposureWarnings({ mode: "standalone", identity: false, metricsListen: false })).toEqual([]);
  });
});
