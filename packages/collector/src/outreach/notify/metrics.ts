// Notification metrics, built at scrape time from the sender's counts.
import { Counter, Gauge, type Registry } from "prom-client";
import type { WebhookSender } from "./sender.js";

export function registerNotificationMetrics(registry: Registry, sender: WebhookSender): void {
  new Counter({
    name: "workstation_notifications_total",
    help: "Webhook deliveries by format (json, slack, ntfy) and outcome (sent, failed after retries, dropped from a full queue).",
    labelNames: ["format", "outcome"],
    registers: [registry],
    collect() {
      this.reset();
      for (const [key, value] of sender.counts) {
        const [outcome, format] = key.split("|");
        this.inc({ format: format!, outcome: outcome! }, value);
      }
    },
  });
  new Counter({
    name: "workstation_notification_retries_total",
    help: "Webhook attempts that failed and were tried again (timeouts, 429, 5xx, no connection).",
    registers: [registry],
    collect() {
      this.reset();
      this.inc(sender.retriesTotal);
    },
  });
  new Gauge({
    name: "workstation_notification_queue_length",
    help: "Webhook messages waiting to be sent.",
    registers: [registry],
    collect() {
      this.set(sender.queueLength);
    },
  });
}
