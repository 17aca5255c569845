// Webhook bodies and configuration, pure.
import { describe, expect, it } from "vitest";
import { ownerOf, parseNotificationsConfig, redactUrl, targetsFor } from "../../../src/outreach/notify/config.js";
import { transitionsOf, warnsPeople, type VmTransition } from "../../../src/outreach/notify/events.js";
import { jsonPayload, ntfyRequest, requestFor, slackPayload } from "../../../src/outreach/notify/payloads.js";
import { BUILTIN_DEFAULT_POLICY, policyFromAnnotations } from "../../../src/engine/policy.js";

const at = Date.parse("2026-12-01T10:00:00Z");
const notice: VmTransition = {
  kind: "notice",
  vm: { namespace: "lab", name: "gpu-1" },
  atMs: at,
  mode: "enforce",
  reason: "idle for 2h <no input>",
  noticeId: "n-abc",
  deadlineMs: at + 600_000,
  idleSeconds: 7200,
  hint: "ws-lease 2h",
  explanation: "StoppingPending",
};
const content = {
  transition: notice,
  owner: "alice",
  keepUrl: "https://ws.example.com/keep/lab/gpu-1?t=k1.x.y",
  vmUrl: "https://ws.example.com/vm/lab/gpu-1",
};

describe("payloads", () => {
  it("generic JSON carries every documented field", () => {
    expect(jsonPayload(content)).toEqual({
      version: 1,
      event: "notice",
      vm: { namespace: "lab", name: "gpu-1" },
      owner: "alice",
      mode: "enforce",
      at: "2026-12-01T10:00:00.000Z",
      reason: "idle for 2h <no input>",
      explanation: "StoppingPending",
      noticeId: "n-abc",
      deadline: "2026-12-01T10:10:00.000Z",
      stopInSeconds: 600,
      idleSeconds: 7200,
      keepRunningHint: "ws-lease 2h",
      keepUrl: content.keepUrl,
      vmUrl: content.vmUrl,
      startUrl: null,
      stopEnds: null,
      text: "alice: lab/gpu-1 will be stopped in 10m (2026-12-01T10:10:00.000Z): idle for 2h <no input>. Keep it running with the link.",
    });
  });

  it("Slack: escaped mrkdwn and link buttons", () => {
    const slack = slackPayload(content);
    expect(slack.text).toContain("*Workstation lab/gpu-1 will be stopped*");
    expect(JSON.stringify(slack.blocks)).toContain("&lt;no input&gt;");
    expect(slack.blocks[1]).toMatchObject({
      type: "actions",
      elements: [{ url: content.keepUrl }, { url: content.vmUrl }],
    });
  });

  it("Slack: every field that carries a user's words is escaped, the top-level text too (issue 34)", () => {
    const hostile = "<!channel> <http://evil.example|click> & <@U123>";
    const dispute = {
      transition: { ...notice, kind: "dispute" as const, reason: `"${hostile}" (the stop: idle)`, hint: hostile },
      owner: "<!here>",
      vmUrl: content.vmUrl,
    };
    for (const slack of [slackPayload(content), slackPayload(dispute)]) {
      // Every string Slack parses as mrkdwn (not the buttons' urls, not plain_text) has no markup left.
      const parsed: string[] = [slack.text];
      const walk = (node: unknown): void => {
        if (Array.isArray(node)) node.forEach(walk);
        else if (node && typeof node === "object") {
          const record = node as Record<string, unknown>;
          if (record.type === "mrkdwn" && typeof record.text === "string") parsed.push(record.text);
          Object.values(record).forEach(walk);
        }
      };
      walk(slack.blocks);
      expect(parsed.length).toBeGreaterThanOrEqual(2);
      for (const text of parsed) expect(text).not.toMatch(/[<>]|&(?!amp;|lt;|gt;)/);
    }
    const text = slackPayload(dispute).text;
    expect(text).toContain("&lt;!channel&gt; &lt;http://evil.example|click&gt; &amp; &lt;@U123&gt;");
    expect(text).toContain("&lt;!here&gt;: says the stop");
    // The same text in the block: one rule, one place.
    expect(slackPayload(dispute).blocks[0]).toEqual({ type: "section", text: { type: "mrkdwn", text } });
    // JSON and ntfy carry the words as written (data, plain text).
    expect(jsonPayload(dispute).reason).toContain(hostile);
    expect(ntfyRequest("https://ntfy.example.com/t", dispute).body.message).toContain(hostile);
  });

  it("ntfy: JSON published at the server root with the topic from the URL", () => {
    const request = ntfyRequest("https://ntfy.example.com/ws-alice", content);
    expect(request.url).toBe("https://ntfy.example.com/");
    expect(request.body).toMatchObject({
      topic: "ws-alice",
      priority: 4,
      click: content.vmUrl,
      actions: [{ action: "view", label: "Keep running", url: content.keepUrl }, { label: "Why?" }],
    });
    expect(ntfyRequest("https://example.com/ntfy/ws-bob", content).url).toBe("https://example.com/ntfy/");
    expect(
      JSON.parse(requestFor({ url: "https://ntfy.example.com/t", format: "ntfy", name: "n" }, content).body).topic,
    ).toBe("t");
  });

  it("stop and cancel read as people say them", () => {
    const stop = jsonPayload({ transition: { ...notice, kind: "stop", reason: "idle for 2h10m" }, owner: "" });
    expect(stop.text).toBe("lab/gpu-1 was stopped: idle for 2h10m. Its disk is kept; start it again when you need it.");
    expect(stop.keepUrl).toBeNull();
  });

  it("every format carries the start link: how to come back", () => {
    const startUrl = "https://ws.example.com/start/lab/gpu-1?t=s1.x.y";
    const stop = {
      transition: { ...notice, kind: "stop" as const, reason: "idle for 2h10m" },
      owner: "alice",
      startUrl,
    };
    expect(jsonPayload(stop)).toMatchObject({
      startUrl,
      text: `alice: lab/gpu-1 was stopped: idle for 2h10m. Its disk is kept; start it again with the start link: ${startUrl}`,
    });
    expect(slackPayload(stop).blocks[1]).toMatchObject({
      elements: [{ text: { text: "Start again…" }, url: startUrl }],
    });
    expect(ntfyRequest("https://ntfy.example.com/t", stop).body.actions).toEqual([
      { action: "view", label: "Start again", url: startUrl },
    ]);
    // The notice says it too: to come back later.
    expect(jsonPayload({ ...content, startUrl }).text).toMatch(
      /Keep it running with the link\. To come back later: https:\/\/ws\.example\.com\/start\//,
    );
  });
});

describe("configuration", () => {
  it("parses the section, with every problem named and no URL echoed", () => {
    const problems: string[] = [];
    const config = parseNotificationsConfig(
      {
        ownerKey: "example.org/owner",
        publicUrl: "https://ws.example.com/",
        timeout: "3s",
        retries: 5,
        webhooks: [
          { url: "https://hooks.slack.com/services/T/B/SECRET", format: "slack" },
          { url: "not a url SECRET2", format: "json" },
          { url: "https://x.example.com", format: "teams" },
        ],
        profiles: { training: [{ url: "https://ntfy.example.com/ws-training", format: "ntfy" }] },
        keepChoices: ["2h", "12h"],
        bogus: 1,
      },
      problems,
    );
    expect(config).toMatchObject({
      ownerKey: "example.org/owner",
      publicUrl: "https://ws.example.com",
      timeoutMs: 3000,
      retries: 5,
      keepChoicesHours: [2, 12],
    });
    expect(config.webhooks).toEqual([
      { url: "https://hooks.slack.com/services/T/B/SECRET", format: "slack", name: "slack@hooks.slack.com" },
    ]);
    expect(config.profiles.training).toHaveLength(1);
    expect(problems).toEqual([
      'notifications: unknown setting "bogus" (known: ownerKey, publicUrl, timeout, retries, queueSize, send, webhooks, profiles, keepChoices)',
      "notifications.webhooks[1]: url is not a valid http(s) URL",
      'notifications.webhooks[2]: format must be one of json, slack, ntfy, not "teams"',
    ]);
    expect(problems.join("\n")).not.toContain("SECRET");
    expect(redactUrl("https://hooks.slack.com/services/T/B/SECRET")).toBe("https://hooks.slack.com/…");
  });

  it("a VM gets the global, its profile's and its annotation's webhooks; its owner from the label", () => {
    const config = parseNotificationsConfig(
      {
        webhooks: [{ url: "https://a.example.com/h" }],
        profiles: { training: [{ url: "https://b.example.com/h", format: "slack" }] },
      },
      [],
    );
    const { targets, problems } = targetsFor(config, {
      profile: "training",
      labels: {},
      annotations: {
        "workstation.aik8s.run/notify-url": "https://c.example.com/h",
        "workstation.aik8s.run/notify-format": "ntfy",
      },
      prefix: "workstation.aik8s.run/",
    });
    expect(problems).toEqual([]);
    expect(targets.map((t) => `${t.format} ${t.url}`)).toEqual([
      "json https://a.example.com/h",
      "slack https://b.example.com/h",
      "ntfy https://c.example.com/h",
    ]);
    const bad = targetsFor(config, {
      profile: "",
      labels: {},
      annotations: { "workstation.aik8s.run/notify-url": "ftp://x" },
      prefix: "workstation.aik8s.run/",
    });
    expect(bad.problems).toEqual(["workstation.aik8s.run/notify-url: url is not a valid http(s) URL"]);
    expect(ownerOf(config, { "platform.example.com/user": "alice" }, {})).toBe("alice");
    expect(ownerOf(config, {}, { "platform.example.com/user": "bob" })).toBe("bob");
    expect(ownerOf(config, {}, {})).toBe("");
  });

  it("the webhook annotations are not policy errors (and their values are never echoed as one)", () => {
    const parsed = policyFromAnnotations(
      {},
      {
        "workstation.aik8s.run/notify-url": "https://hooks.slack.com/services/SECRET",
        "workstation.aik8s.run/notify-format": "slack",
      },
      BUILTIN_DEFAULT_POLICY,
      {},
      "workstation.aik8s.run/",
    );
    expect(parsed.errors).toEqual([]);
  });

  it("observe mode warns nobody unless observe-notices is on", () => {
    expect(warnsPeople({ mode: "observe" }, {})).toBe(false);
    expect(warnsPeople({ mode: "observe" }, { observeNotices: true })).toBe(true);
    expect(warnsPeople({ mode: "enforce" }, {})).toBe(true);
  });

  it("transitions come from the engine's actions", () => {
    const decision = {
      summary: "s",
      actions: [
        {
          kind: "notice",
          id: "n1",
          deadlineMs: at + 1,
          stopInSeconds: 1,
          idleSeconds: 5,
          reason: "idle",
          hint: "h",
          mode: "enforce",
          repeat: true,
        },
        { kind: "notice-cleared", id: "n0", reason: "input on pts/1" },
        { kind: "persist", values: {} },
      ],
    } as unknown as Parameters<typeof transitionsOf>[1];
    const out = transitionsOf({ namespace: "a", name: "b" }, decision, at, {
      notice: { mode: "observe" },
    } as Parameters<typeof transitionsOf>[3]);
    expect(out.map((t) => [t.kind, t.mode, t.reason])).toEqual([
      ["reminder", "enforce", "idle"],
      ["cancel", "observe", "input on pts/1"],
    ]);
  });
});
