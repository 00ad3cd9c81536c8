/**
 * Sets `key` in an insertion-ordered map used as a bounded cache: the key goes last (a re-set one
 * too), and the oldest entries are forgotten while the map holds more than `max`.
 */
export function setBounded<K, V>(map: Map<K, V>, key: K, value: V, max: number): void {
  map.delete(key);
  map.set(key, value);
  for (const oldest of map.keys()) {
    if (map.size <= max) break;
    map.delete(oldest);
  }
}
