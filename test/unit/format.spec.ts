import {
  formatBytes,
  formatDelta,
  formatDuration,
  formatIdle,
  formatPlacement,
  listNames,
  sumBytes
} from '../../src/analysis/format';

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

describe('listNames', () => {
  it('joins up to max names, then counts the rest', () => {
    expect(listNames([], 4)).toBe('');
    expect(listNames(['model'], 4)).toBe('model');
    expect(listNames(['a', 'b', 'c', 'd'], 4)).toBe('a, b, c, d');
    expect(listNames(['a', 'b', 'c', 'd', 'e', 'f'], 4)).toBe('a, b, c, d +2');
    expect(listNames(['a', 'b', 'c'], 2)).toBe('a, b +1');
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
  it('joins the first names and counts the rest', () => {
    expect(listNames(['a', 'b', 'c'], 2)).toBe('a, b +1');
    expect(listNames(['a', 'b'], 2)).toBe('a, b');
    expect(listNames([], 3)).toBe('');
    expect(listNames(['Out[2]', '_2', '__'], 1)).toBe('Out[2] +2');
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
