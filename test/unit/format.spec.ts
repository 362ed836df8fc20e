import {
  formatBytes,
  formatPlacement,
  listNames,
  sumBytes
} from '../../src/analysis/format';

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
