import http from 'k6/http';
import { sleep } from 'k6';

export const options = { vus: 1, duration: '1s' };

export default function () {
  http.get('http://127.0.0.1:18089/');
  http.get('http://127.0.0.1:18089/slow');
  if (__ITER % 5 === 0) {
    http.get('http://127.0.0.1:18089/error');
  }
  if (__ITER === 2) {
    http.get('http://127.0.0.1:18090/refused', { timeout: '1s' });
  }
  sleep(0.1);
}
