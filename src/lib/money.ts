// Money is integer micro-units (1 unit = 1,000,000 micro). Decimal strings are parsed and
// printed without ever passing through a float.

export const MICRO = 1_000_000;

/**
 * The largest balance, credit limit, price or amount, either way: 10^15 micro-units, one
 * billion currency units. Any sum of two such values (a balance plus a top-up, a balance plus
 * its credit limit) stays far inside the range where JS numbers are exact integers (2^53).
 */
export const MAX_MONEY = 1_000_000_000_000_000;

/** Whether a value is an integer amount within ±MAX_MONEY. */
export function inMoneyRange(micro: number): boolean {
  return Number.isSafeInteger(micro) && micro <= MAX_MONEY && micro >= -MAX_MONEY;
}

// A plain decimal only: an optional minus, no leading zeros, no plus, no spaces. An amount is
// money moved on an operator's word, so anything a typo or a script could have mangled
// (" 5", "+5", "00005") is refused rather than guessed at.
const DECIMAL = /^(-)?(0|[1-9]\d*)(?:\.(\d{1,6}))?$/;

export class MoneyParseError extends Error {
  constructor(input: string, reason: string) {
    super(`invalid amount ${quoteInput(input)}: ${reason}`);
    this.name = 'MoneyParseError';
  }
}

/**
 * A value quoted back in an error message, cut when long: the first 40 characters, "…" and
 * its length, so a pasted file or a runaway script does not fill the terminal or a log.
 */
export function quoteInput(input: string, keep = 40): string {
  const chars = Array.from(input);
  if (chars.length <= keep + 10) return `"${input}"`;
  return `"${chars.slice(0, keep).join('')}…" (${chars.length} characters)`;
}

/** Parse "12.50", "-3", "0.0075" into micro-units. At most 6 decimals. */
export function parseMoney(input: string): number {
  const s = String(input);
  const m = DECIMAL.exec(s);
  if (!m) {
    if (/^-?(0|[1-9]\d*)\.\d{7,}$/.test(s)) throw new MoneyParseError(s, 'at most 6 decimal places');
    throw new MoneyParseError(s, 'expected a plain decimal number such as 12.50');
  }
  const sign = m[1] === '-' ? -1 : 1;
  const whole = m[2];
  const frac = (m[3] ?? '').padEnd(6, '0');
  const wholeNum = Number(whole);
  const micro = wholeNum * MICRO + Number(frac);
  if (!(wholeNum <= MAX_MONEY / MICRO) || !inMoneyRange(micro))
    throw new MoneyParseError(s, `too large: at most ${formatMoney(MAX_MONEY)} either way`);
  return sign * micro === 0 ? 0 : sign * micro;
}

/** Format micro-units as a decimal string with at least 2 decimals: 12500000 -> "12.50". */
export function formatMoney(micro: number | bigint): string {
  if (typeof micro === 'bigint') return formatBig(micro);
  if (!Number.isSafeInteger(micro)) throw new Error(`not an integer amount: ${micro}`);
  const neg = micro < 0;
  const abs = Math.abs(micro);
  return decimal(neg, String(Math.floor(abs / MICRO)), abs % MICRO);
}

/** A BigInt amount (the ledger check reads sums as BigInt): exact past 2^53 too. */
function formatBig(micro: bigint): string {
  const neg = micro < 0n;
  const abs = neg ? -micro : micro;
  return decimal(neg, String(abs / BigInt(MICRO)), Number(abs % BigInt(MICRO)));
}

function decimal(neg: boolean, whole: string, fraction: number): string {
  let frac = String(fraction).padStart(6, '0').replace(/0+$/, '');
  if (frac.length < 2) frac = frac.padEnd(2, '0');
  return `${neg ? '-' : ''}${whole}.${frac}`;
}

/** JSON shape used on every surface: both representations. */
/**
 * A price's amount: a price may pass 2^53 where no balance can (a maximal SMS price, MAX_MONEY,
 * times its segments), and is then formatted exactly from its unit price and count.
 */
export function formatPrice(unit: number, units: number): string {
  const total = unit * units;
  return Number.isSafeInteger(total) ? formatMoney(total) : formatMoney(BigInt(unit) * BigInt(units));
}

export function moneyJson(micro: number, currency?: string) {
  return currency === undefined
    ? { micro, amount: formatMoney(micro) }
    : { micro, amount: formatMoney(micro), currency };
}
