// SMS segment counting: GSM 03.38 7-bit default alphabet (160 septets alone, 153 per part
// when concatenated) or UCS-2 (70 code units alone, 67 per part). Characters of the GSM
// extension table are sent as ESC + char and count as two septets. Parts never split an
// escape sequence or a UTF-16 surrogate pair, as carriers do not.

const GSM_BASIC =
  '@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !"#¤%&\'()*+,-./0123456789:;<=>?' +
  '¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà';
const GSM_EXTENDED = '\f^{}\\[~]|€';

const basic = new Set(GSM_BASIC);
const extended = new Set(GSM_EXTENDED);

export interface SegmentInfo {
  encoding: 'GSM-7' | 'UCS-2';
  /** Septets (GSM-7) or UTF-16 code units (UCS-2). */
  units: number;
  segments: number;
}

export function isGsm7(text: string): boolean {
  for (const ch of text) if (!basic.has(ch) && !extended.has(ch)) return false;
  return true;
}

function pack(weights: number[], single: number, multi: number): number {
  const total = weights.reduce((a, b) => a + b, 0);
  if (total <= single) return total === 0 ? 1 : 1;
  let segments = 1;
  let used = 0;
  for (const w of weights) {
    if (used + w > multi) {
      segments++;
      used = 0;
    }
    used += w;
  }
  return segments;
}

export function smsSegments(text: string): SegmentInfo {
  if (isGsm7(text)) {
    const weights = [...text].map((ch) => (extended.has(ch) ? 2 : 1));
    const units = weights.reduce((a, b) => a + b, 0);
    return { encoding: 'GSM-7', units, segments: pack(weights, 160, 153) };
  }
  // Iterating a string by code point keeps surrogate pairs (weight 2) together.
  const weights = [...text].map((ch) => ch.length);
  const units = text.length;
  return { encoding: 'UCS-2', units, segments: pack(weights, 70, 67) };
}
