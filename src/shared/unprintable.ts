/**
 * Line breaks, escapes and other controls, and the marks that reorder text on screen: in a key's name they
 * would break a table or change what a terminal shows.
 */
export const UNPRINTABLE = /[\p{Cc}\p{Zl}\p{Zp}\u202A-\u202E\u2066-\u2069]/u
