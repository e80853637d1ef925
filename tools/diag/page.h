// The page `weft diag --serve` gives browsers: plain HTML and JavaScript, no build step. It opens
// a WebSocket to /ws, draws every state message (each communicator's stuck-rank report and its
// ranks' latest operations) and sends the commands of its buttons.
#pragma once

namespace weft::tools {

inline constexpr const char* kDiagPage = R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>weft diag</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; margin: 0 0 .3em; }
#status { color: #666; margin-bottom: 1em; }
#status.down { color: #b00; }
section.comm { border: 1px solid #ccc; border-radius: 6px; padding: .6em 1em; margin: .8em 0; }
ul.report li { margin: .2em 0; }
ul.report li.stuck { color: #b00; font-weight: 600; }
table { border-collapse: collapse; margin-top: .5em; }
td, th { border-bottom: 1px solid #eee; padding: .2em .8em; text-align: left; font-size: 13px; }
tr.silent td { color: #b00; }
#controls { margin: 1em 0; }
#replies { white-space: pre-wrap; font: 12px monospace; color: #333; background: #f6f6f6;
           padding: .5em; max-height: 14em; overflow: auto; }
</style>
</head>
<body>
<h1>weft diag</h1>
<div id="status">connecting...</div>
<div id="comms"></div>
<div id="controls">
  <button id="dump">Dump flight records to diag_dir</button>
  &nbsp; rank <input id="rank" type="number" min="0" value="0" style="width:4em">
  <select id="level"><option>trace</option><option selected>debug</option><option>info</option>
  <option>warn</option><option>error</option></select>
  <button id="loglevel">Set log level</button>
</div>
<div id="replies"></div>
<script>
"use strict";
let socket = null;
const $ = (id) => document.getElementById(id);
function text(tag, value, cls) {
  const e = document.createElement(tag);
  e.textContent = value;
  if (cls) e.className = cls;
  return e;
}
function latest(record) {
  if (!record || !record.entries || record.entries.length === 0) return ["", ""];
  const open = record.entries.filter((e) => e.state === "queued" || e.state === "running");
  const e = open.length ? open[0] : record.entries[record.entries.length - 1];
  return [e.describe || e.op, e.state];
}
function draw(state) {
  const root = $("comms");
  root.replaceChildren();
  $("status").className = "";
  $("status").textContent = "updated " + new Date(state.time * 1000).toLocaleTimeString() +
      " \u00b7 " + state.answered + " rank(s) answered";
  for (const c of state.communicators) {
    const s = document.createElement("section");
    s.className = "comm";
    s.dataset.token = c.token;
    s.appendChild(text("h2", "communicator " + c.token + " (" + c.size + " ranks)"));
    const ul = document.createElement("ul");
    ul.className = "report";
    for (const line of c.report) {
      const stuck = /has not entered|have not entered|stuck|not responding|failed|did not answer/.test(line);
      ul.appendChild(text("li", line, stuck ? "stuck" : ""));
    }
    s.appendChild(ul);
    const table = document.createElement("table");
    const head = document.createElement("tr");
    for (const h of ["rank", "operation", "state", "collectives", "errors", "peers lost"]) {
      head.appendChild(text("th", h));
    }
    table.appendChild(head);
    c.ranks.forEach((record, r) => {
      const tr = document.createElement("tr");
      const [op, st] = latest(record);
      if (!record) tr.className = "silent";
      tr.appendChild(text("td", String(r)));
      tr.appendChild(text("td", record ? op : "(no answer)"));
      tr.appendChild(text("td", st));
      const m = record && record.metrics ? record.metrics : null;
      tr.appendChild(text("td", m ? String(m.collectives) : ""));
      tr.appendChild(text("td", m ? String(m.errors) : ""));
      tr.appendChild(text("td", m ? String(m.lost_peers) : ""));
      table.appendChild(tr);
    });
    s.appendChild(table);
    root.appendChild(s);
  }
}
function note(message) {
  $("replies").textContent = JSON.stringify(message) + "\n" + $("replies").textContent;
}
function connect() {
  socket = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws");
  socket.onmessage = (ev) => {
    const m = JSON.parse(ev.data);
    if (m.type === "state") draw(m); else note(m);
  };
  socket.onclose = () => {
    $("status").className = "down";
    $("status").textContent = "disconnected; retrying";
    setTimeout(connect, 1000);
  };
}
$("dump").onclick = () => socket.send(JSON.stringify({cmd: "dump"}));
$("loglevel").onclick = () => socket.send(JSON.stringify(
    {cmd: "log_level", rank: Number($("rank").value), level: $("level").value}));
connect();
</script>
</body>
</html>
)HTML";

}  // namespace weft::tools
