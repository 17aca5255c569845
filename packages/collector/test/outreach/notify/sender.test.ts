// The webhook sender against a real HTTP receiver on loopback: bodies arrive
// as sent, 500 and hangs are retried with backoff and counted, a full queue
// drops the oldest, and enqueue never waits for the network.
import { afterEach, describe, expect, it } from "vitest";
import { webhookReceiver, type WebhookReceiver } from "../../../../../test/support/webhook-receiver.js";
import { WebhookSender } from "../../../src/outreach/notify/sender.js";

const logs: string[] = [];
const log = (_level: string, message: string) => void logs.push(message);
let receiver: WebhookReceiver | undefined;

afterEach(async () => {
  await receiver?.close();
  logs.length = 0;
});

const request = (path: string, body: unknown) => ({
  name: "receiver",
  format: "json" as const,
  url: `${receiver!.url}${path}`,
  body: JSON.stringify(body),
  about: "notice for ns/vm",
});

describe("WebhookSender", () => {
  it("posts the body as JSON and counts it sent", async () => {
    receiver = await webhookReceiver();
    const sender = new WebhookSender({ log, timeoutMs: 2000, retries: 2, queueSize: 10 });
    sender.enqueue(request("/ok", { event: "notice", n: 1 }));
    await sender.idle();
    expect(receiver.on("/ok")).toHaveLength(1);
    expect(receiver.on("/ok")[0]!.body).toEqual({ event: "notice", n: 1 });
    expect(receiver.on("/ok")[0]!.headers["content-type"]).toBe("application/json");
    expect(sender.counts.get("sent|json")).toBe(1);
  });

  it("retries a 500 with backoff, then counts it failed; the log names the target, not the URL", async () => {
    receiver = await webhookReceiver();
    const delays: number[] = [];
    const sender = new WebhookSender({
      log,
      timeoutMs: 2000,
      retries: 3,
      queueSize: 10,
      random: () => 1,
      sleep: async (ms) => void delays.push(ms),
    });
    sender.enqueue(request("/fail/secret-token", { event: "stop" }));
    await sender.idle();
    expect(receiver.on("/fail")).toHaveLength(4);
    expect(delays).toEqual([1000, 2000, 4000]);
    expect(sender.counts.get("failed|json")).toBe(1);
    expect(sender.retriesTotal).toBe(3);
    expect(logs.join("\n")).toContain("not delivered after 4 attempt(s): HTTP 500");
    expect(logs.join("\n")).not.toContain("secret-token");
  });

  it("gives up on a receiver that hangs after the timeout, and enqueue returns at once", async () => {
    receiver = await webhookReceiver();
    const sender = new WebhookSender({ log, timeoutMs: 200, retries: 1, queueSize: 10, sleep: async () => {} });
    let returned = false;
    sender.enqueue(request("/hang", { event: "notice" }));
    returned = true;
    // enqueue came back while the receiver had not even been reached or answered.
    expect(returned).toBe(true);
    expect(receiver.on("/hang").length).toBeLessThanOrEqual(1);
    await sender.idle();
    expect(receiver.on("/hang")).toHaveLength(2);
    expect(sender.counts.get("failed|json")).toBe(1);
    expect(logs.join("\n")).toContain("no answer within 0.2s");
  });

  it("reports a receiver that redirects as a redirect, does not follow it and does not retry it", async () => {
    receiver = await webhookReceiver();
    const sender = new WebhookSender({ log, timeoutMs: 2000, retries: 3, queueSize: 10, sleep: async () => {} });
    sender.enqueue(request("/redirect/secret-token", { event: "notice" }));
    await sender.idle();
    expect(receiver.on("/redirect")).toHaveLength(1);
    expect(receiver.on("/ok-elsewhere")).toHaveLength(0);
    expect(sender.retriesTotal).toBe(0);
    expect(sender.counts.get("failed|json")).toBe(1);
    expect(logs.join("\n")).toContain("after 1 attempt(s): the receiver redirects (HTTP 302)");
    expect(logs.join("\n")).not.toContain("secret-token");
  });

  it("does not retry a 4xx other than 429", async () => {
    receiver = await webhookReceiver();
    const sender = new WebhookSender({
      log,
      timeoutMs: 2000,
      retries: 3,
      queueSize: 10,
      fetch: async () => new Response("no", { status: 404 }),
    });
    sender.enqueue(request("/gone", {}));
    await sender.idle();
    expect(sender.counts.get("failed|json")).toBe(1);
    expect(sender.retriesTotal).toBe(0);
  });

  it("a full queue drops the oldest message and counts it", async () => {
    receiver = await webhookReceiver();
    const sender = new WebhookSender({ log, timeoutMs: 300, retries: 0, queueSize: 2, perReceiver: 1 });
    for (let n = 1; n <= 4; n++) sender.enqueue(request("/hang", { n }));
    await sender.idle();
    // One in flight at once, two queued: of 4, the second was dropped for the fourth.
    expect(receiver.on("/hang").map((h) => (h.body as { n: number }).n)).toEqual([1, 3, 4]);
    expect(sender.counts.get("dropped|json")).toBe(1);
    expect(logs.join("\n")).toContain("queue full (2)");
  });

  it("a receiver that hangs delays only its own messages", async () => {
    receiver = await webhookReceiver();
    const sender = new WebhookSender({ log, timeoutMs: 5000, retries: 0, queueSize: 100 });
    for (let n = 1; n <= 6; n++) sender.enqueue(request("/hang", { n }));
    sender.enqueue(request("/ok", { n: 7 }));
    // The healthy receiver gets its message while the hanging one holds its slots.
    const deadline = Date.now() + 10_000;
    while (receiver.on("/ok").length === 0 && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 20));
    expect(receiver.on("/ok")).toHaveLength(1);
    expect(receiver.hanging()).toBe(2); // two at a time per receiver
    expect(sender.queueLength).toBe(4);
    sender.close();
    expect(sender.counts.get("dropped|json")).toBe(4);
  });
});
