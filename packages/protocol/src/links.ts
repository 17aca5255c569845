// Links in the text ws writes (terminal notices, webhooks' text, the welcome back, ws-lease, the
// ssh helper, Events): a link is followed by whitespace or the end of its line, never by
// punctuation, so that selecting it (a double click in most terminals and chat clients takes a
// trailing "." or ")" along) gives a link that works (docs/coming-back.md, "The start link"). Pure.

/** A link as ws writes it in text: from http(s):// up to the next whitespace. */
const LINK = /https?:\/\/\S+/g;
/** What a reader's selection would take along after a link. */
const TRAILING_PUNCTUATION = /[.,;:!?)\]}>'"…]$/;

/** `text` as a sentence: a final "." unless it ends with a link, which ends its line bare. */
export function sentence(text: string): string {
  return /https?:\/\/\S+$/.test(text) ? text : `${text}.`;
}

/** The links in `text` that punctuation follows: copied, they would not work. */
export function linksFollowedByPunctuation(text: string): string[] {
  return [...text.matchAll(LINK)].map((match) => match[0]).filter((link) => TRAILING_PUNCTUATION.test(link));
}
