// Issue 40 #6: a link in any text ws writes is followed by whitespace or the end of its line, never
// by punctuation (".", ",", ";", ":", ")" …): a person copying "…?t=s1.abc." got "not valid".
// Every text template renders here with real signed links (and reasons and hints that end with a
// link, as a hostile or unlucky one may) and is scanned: the terminal notice (enforce, observe,
// cancelled, the bytes a terminal gets), the welcome back, `ws-lease status`, the webhooks' plain
// text in every format and kind, and the ssh helper's lines (test/e2e/ssh-proxy-answers.test.ts
// scans those under fuzzing). And a link copied with its punctuation still works.
import { linksFollowedByPunctuation } from "@ws/protocol";
import { describe, expect, it } from "vitest";
import { deriveLinkKey, keepLinkUrl, verifyKeepLink } from "../packages/collector/src/links/keep-token.js";
import { parseNotificationsConfig } from "../packages/collector/src/outreach/notify/config.js";
import { TRANSITION_KINDS, type VmTransition } from "../packages/collector/src/outreach/notify/events.js";
import { Outreach } from "../packages/collector/src/outreach/notify/outreach.js";
import { jsonPayload, ntfyRequest, slackPayload, textOf } from "../packages/collector/src/outreach/notify/payloads.js";
import { deriveStartLinkKey, startLinkUrl, verifyStartLink } from "../packages/collector/src/links/start-token.js";
import { keepHintWithLink } from "../packages/collector/src/loop/outreach-view.js";
import { formatStatus } from "../packages/guest-agent/src/lease/format.js";
import { cancellationText, noticeText, terminalBytes } from "../packages/guest-agent/src/notice/format.js";
import { welcomeText } from "../packages/guest-agent/src/notice/welcome.js";

const NOW = Date.parse("2026-12-01T10:00:00Z");
const vm = { namespace: "users", name: "alice-gpu" };
const tokenKey = Buffer.from("a collector token key of enough length, for tests");
const PUBLIC = "https://ws.example.com";
const startUrl = startLinkUrl(PUBLIC, deriveStartLinkKey(tokenKey), vm, NOW, 14 * 86_400);
const keepUrl = keepLinkUrl(PUBLIC, deriveLinkKey(tokenKey), { ...vm, noticeId: "n-1", expiresAtMs: NOW + 600_000 });
const vmUrl = `${PUBLIC}/vm/users/alice-gpu`;
/** A reason or a hint that itself ends with a link (a policy's own words can). */
const ENDS_WITH_LINK = "idle for 2h, see https://wiki.example.com/workstations";

/** Every link in `text` is one ws made, whole, and followed by whitespace or the end of a line. */
function expectBareLinks(text: string, made: string[]): void {
  expect(linksFollowedByPunctuation(text), text).toEqual([]);
  for (const link of made) expect(text).toContain(link);
}

describe("links are never followed by punctuation (issue 40 #6)", () => {
  const outreach = new Outreach({
    config: parseNotificationsConfig({ publicUrl: PUBLIC }, []),
    log: () => {},
    metadataFor: () => ({ labels: {}, annotations: {} }),
    prefix: "workstation.aik8s.run/",
    linkKey: deriveLinkKey(tokenKey),
    startUrl: (key, nowMs) => startLinkUrl(PUBLIC, deriveStartLinkKey(tokenKey), key, nowMs, 14 * 86_400),
  });
  const noticeLink = outreach.noticeLink(vm, "n-1", NOW + 600_000, NOW)!;
  const links = noticeLink.match(/https?:\/\/\S+/g)!;

  it("the terminal notice, with the keep and start links the collector adds to its hint", () => {
    expect(links).toHaveLength(2);
    for (const hint of ["ws-lease 2h", `ws-lease 2h, or ${ENDS_WITH_LINK}`])
      for (const observeMode of [false, true]) {
        const text = noticeText(
          {
            stopInSeconds: 600,
            reason: ENDS_WITH_LINK,
            keepRunningHint: keepHintWithLink(hint, noticeLink),
            idleSeconds: 7200,
            observeMode,
          },
          NOW,
          "UTC",
        );
        expectBareLinks([text.title, ...text.lines].join("\n"), links);
        expectBareLinks(terminalBytes(text), links);
      }
    expectBareLinks(cancellationText(ENDS_WITH_LINK).lines.join("\n"), []);
  });

  it("the welcome back and ws-lease status", () => {
    const welcome = welcomeText(
      {
        stoppedAtMs: NOW - 3600_000,
        reason: ENDS_WITH_LINK,
        idleSeconds: 7200,
        lastActivity: "a kernel of https://jupyter.example.com/lab",
        lastActivityAtMs: NOW - 9000_000,
        keepHint: "ws-lease 8h",
        disputeUrl: startUrl,
      },
      "UTC",
    );
    expectBareLinks([welcome.title, ...welcome.lines].join("\n"), [startUrl]);
    const status = formatStatus(
      {
        now: new Date(NOW).toISOString(),
        collector: { connected: true, address: "ws-collector:9443" },
        capSeconds: 86_400,
        capSource: "policy",
        leases: [],
        notice: {
          id: "n-1",
          stopInSeconds: 600,
          stopAt: new Date(NOW + 600_000).toISOString(),
          reason: ENDS_WITH_LINK,
          keepRunningHint: keepHintWithLink("ws-lease 2h", noticeLink),
          idleSeconds: 7200,
          mode: "enforce",
        },
      },
      { nowMs: NOW, timeZone: "UTC" },
    );
    expectBareLinks(status, []);
  });

  it("the webhooks' plain text, every kind, every format", () => {
    for (const kind of TRANSITION_KINDS)
      for (const reason of ["idle for 2h", ENDS_WITH_LINK])
        for (const hint of [undefined, "ws-lease 2h", ENDS_WITH_LINK]) {
          const transition: VmTransition = {
            kind,
            vm,
            atMs: NOW,
            mode: kind === "would-stop" ? "observe" : "enforce",
            reason,
            explanation: reason,
            ...(kind === "notice" || kind === "reminder" ? { noticeId: "n-1", deadlineMs: NOW + 600_000 } : {}),
            ...(hint ? { hint } : {}),
          };
          for (const content of [
            { transition, owner: "alice", startUrl, vmUrl, ...(kind === "notice" ? { keepUrl } : {}) },
            { transition, owner: "", startUrl, ends: { text: "2 ssh sessions", items: [] } as never },
          ]) {
            const made = kind === "notice" || kind === "reminder" || kind === "stop" ? [startUrl] : [];
            expectBareLinks(textOf(content), made);
            expectBareLinks(jsonPayload(content).text, made);
            expectBareLinks(slackPayload(content).text, made);
            expectBareLinks(String(ntfyRequest("https://ntfy.example.com/ws-alice", content).body["message"]), made);
          }
        }
  });

  it("a start or keep link copied with the punctuation after it still works; a changed one does not", () => {
    const start = new URL(startUrl).searchParams.get("t")!;
    const keep = new URL(keepUrl).searchParams.get("t")!;
    const startKey = deriveStartLinkKey(tokenKey);
    const keepKey = deriveLinkKey(tokenKey);
    for (const tail of [".", ",", ")", ").", ";", ":", "!", "?", '"', "'", ">", "…"]) {
      expect(verifyStartLink(startKey, `${start}${tail}`, vm, NOW), tail).toMatchObject({ ok: true });
      expect(verifyKeepLink(keepKey, `${keep}${tail}`, vm, NOW), tail).toMatchObject({ ok: true });
    }
    // Only what cannot be part of a token goes: a changed signature character is still refused.
    const changed = `${start.slice(0, -1)}${start.endsWith("A") ? "B" : "A"}.`;
    expect(verifyStartLink(startKey, changed, vm, NOW)).toMatchObject({ ok: false, problem: "tampered" });
    expect(verifyStartLink(startKey, `${start}x`, vm, NOW)).toMatchObject({ ok: false });
  });
});
