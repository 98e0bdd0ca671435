'use strict';

const test = require('node:test');
const assert = require('node:assert');
const http = require('node:http');
const { sum } = require('./sum.js');

test('sum adds', () => {
  assert.strictEqual(sum([1, 2, 3]), 6);
});

test('a dev server on loopback answers', async () => {
  const server = http.createServer((req, res) => res.end('hello'));
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  const body = await new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port }, (res) => {
      let data = '';
      res.on('data', (c) => (data += c));
      res.on('end', () => resolve(data));
    }).on('error', reject);
  });
  server.close();
  assert.strictEqual(body, 'hello');
});
