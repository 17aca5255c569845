// Why a signed link was refused, in the words its page shows: one text for the keep link and the
// start link, which differ only in what they are called and what brings a fresh one.
import { type VmKey, vmId } from "../model/vm-key.js";
import { at, escapeHtml } from "./html.js";
import type { LinkClaims, LinkProblem } from "../links/signed.js";

export interface LinkRefusal {
  status: number;
  title: string;
  /** HTML: every value in it is escaped. */
  detailHtml: string;
}

/**
 * The refusal of a link `problem` names (`claims` as the verdict gave them). `what` is the link
 * ("This link", "This start link"); `renewal` follows the expiry time (", the end of the warning
 * period." or ". The next stop message brings a new one; …").
 */
export function linkRefusal(
  problem: LinkProblem,
  claims: LinkClaims | undefined,
  vm: VmKey,
  what: string,
  renewal: string,
): LinkRefusal {
  switch (problem) {
    case "malformed":
    case "tampered":
      return {
        status: 400,
        title: `${what} is not valid`,
        detailHtml:
          "It was changed or cut short (its signature does not match). Open the link exactly as you received it.",
      };
    case "expired":
      return {
        status: 410,
        title: `${what} has expired`,
        detailHtml: `It was valid until ${at(claims!.expiresAtMs)}${renewal}`,
      };
    case "other-vm":
      return {
        status: 400,
        title: `${what} is for another VM`,
        detailHtml: `It belongs to ${escapeHtml(`${claims!.namespace}/${claims!.name}`)}, not ${escapeHtml(vmId(vm))}.`,
      };
  }
}
