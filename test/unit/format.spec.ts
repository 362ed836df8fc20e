import {
  formatBytes,
  formatDelta,
  formatDuration,
  formatIdle,
  fitText,
  formatPlacement,
  listNames,
  shortenMiddle,
  sumBytes
} from '../../src/analysis/format';
import { nullTranslator } from '@jupyterlab/translation';

const MiB = 2 ** 20;

describe('formatBytes', () => {
  it.each([
    [0, '0 B'],
    [1023, '1023 B'],
    [1024, '1.0 KiB'],
    [12_700_000, '12.1 MiB'],
    [141 * 2 ** 30, '141.0 GiB'],
    [null, 'n/a'],
    [undefined, 'n/a'],
    [-5, 'n/a'],
    [Infinity, 'n/a']
  ])('formats %p as %p (IEC units)', (value, text) => {
    expect(formatBytes(value as number | null)).toBe(text);
  });
});

describe('formatDuration / formatDelta', () => {
  it('formats durations and deltas', () => {
    expect(formatDuration(null)).toBe('—');
    expect(formatDuration(850)).toBe('850 ms');
    expect(formatDuration(12_345)).toBe('12.3 s');
    expect(formatDuration(245_000)).toBe('4 min 05 s');
    expect(formatDelta(12 * MiB)).toBe('+12.0 MiB');
    expect(formatDelta(-3 * MiB)).toBe('−3.0 MiB');
    expect(formatDelta(0)).toBe('0 B');
    expect(formatDelta(null)).toBe('n/a');
  });

  it.each([
    [0, '0 ms'],
    [999.4, '999 ms'],
    [1000, '1.0 s'],
    [59_940, '59.9 s'],
    [60_000, '1 min 00 s'],
    [3_599_000, '59 min 59 s'],
    [7_265_000, '121 min 05 s'],
    [NaN, '—'],
    [Infinity, '—']
  ])('formats a duration of %p ms as %p', (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });

  it('writes a negative delta with a minus sign, not a hyphen', () => {
    expect(formatDelta(-1024)).toBe('\u22121.0 KiB');
    expect(formatDelta(512)).toBe('+512 B');
  });
});

describe('sumBytes / formatPlacement', () => {
  it('sums per device and filters', () => {
    const perDevice = { cpu: 100, 'cuda:0': 2048, 'cuda:1': 1024 };
    expect(sumBytes(perDevice)).toBe(3172);
    expect(sumBytes(perDevice, d => d.startsWith('cuda'))).toBe(3072);
  });

  it('says where a model lives', () => {
    expect(formatPlacement({ 'cuda:0': 12 * 2 ** 20 })).toBe(
      '12.0 MiB on cuda:0'
    );
    expect(formatPlacement({ cpu: 2 ** 20 })).toBe('1.0 MiB in RAM');
    expect(formatPlacement({})).toBe('0 B');
  });
});

describe('listNames', () => {
  const trans = nullTranslator.load('jupyterlab_gpu_hygiene');
  it('joins up to max names, then says how many more in words', () => {
    expect(listNames([], 4, trans)).toBe('');
    expect(listNames(['model'], 4, trans)).toBe('model');
    expect(listNames(['a', 'b', 'c', 'd'], 4, trans)).toBe('a, b, c, d');
    expect(listNames(['a', 'b', 'c', 'd', 'e', 'f'], 4, trans)).toBe(
      'a, b, c, d and 2 more'
    );
    expect(listNames(['Out[2]', '_2', '__'], 1, trans)).toBe(
      'Out[2] and 2 more'
    );
    // never "and 3 more" alone
    expect(listNames(['a', 'b', 'c'], 0, trans)).toBe('a and 2 more');
  });
});

describe('shortenMiddle', () => {
  it('keeps both ends of a long name and fits the room', () => {
    expect(shortenMiddle('BertForSequenceClassification', 16)).toBe(
      'BertForS…ication'
    );
    expect(shortenMiddle('BertForSequenceClassification', 16)).toHaveLength(16);
    expect(shortenMiddle('model', 16)).toBe('model');
    expect(shortenMiddle('abcdefghij', 1)).toHaveLength(5);
  });
});

describe('fitText', () => {
  it('takes the first candidate that fits, cuts the last only when none does', () => {
    expect(fitText(['x'.repeat(141), 'short'])).toBe('short');
    expect(fitText(['fits', 'short'])).toBe('fits');
    const cut = fitText(['y'.repeat(200)]);
    expect(cut).toHaveLength(140);
    expect(cut.endsWith('…')).toBe(true);
    expect(() => fitText([])).toThrow(/no candidate/);
  });
});

describe('formatIdle', () => {
  it('is coarse', () => {
    expect(formatIdle(40.7)).toBe('40 s');
    expect(formatIdle(25 * 60 + 3)).toBe('25 min');
    expect(formatIdle(2 * 3600 + 5 * 60)).toBe('2 h 05 min');
    expect(formatIdle(3 * 86400 + 4 * 3600)).toBe('3 d 4 h');
    expect(formatIdle(null)).toBe('—');
    expect(formatIdle(-1)).toBe('—');
  });
});
