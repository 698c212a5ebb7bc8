// An Express app that logs each request with morgan, for the tests that read its lines.
// node app.js PORT LOG_FILE FORMAT [WORKERS]: FORMAT is a morgan format name or string;
// WORKERS > 0 starts a cluster master that forks that many workers.
"use strict";
const cluster = require("node:cluster");
const fs = require("node:fs");
const express = require("express");
const morgan = require("morgan");

const [port, logFile, format, workers] = process.argv.slice(2);

if (Number(workers) > 0 && cluster.isPrimary) {
  for (let i = 0; i < Number(workers); i += 1) cluster.fork();
} else {
  const app = express();
  app.use(morgan(format, { stream: fs.createWriteStream(logFile, { flags: "a" }) }));
  // /slow?ms=N&code=C answers status C (200) after N ms (0).
  app.get("*", (req, res) => {
    const ms = Math.min(Number(req.query.ms) || 0, 10000);
    setTimeout(() => res.status(Number(req.query.code) || 200).send("ok\n"), ms);
  });
  app.listen(Number(port), "127.0.0.1");
}
