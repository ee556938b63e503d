// The console: reads the JSON API and builds the DOM with textContent only (group, member and
// client ids are attacker-controlled strings and must never be parsed as HTML).
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const REFRESH_MS = 5000;

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, String(value));
  if (text !== undefined) node.textContent = String(text);
  return node;
}

function badge(text) {
  if (text === null || text === undefined) return el("span", "–");
  // The class is one of a fixed set of states or statuses; anything else gets no class.
  const known = /^[A-Za-z]+$/.test(text) ? text : "";
  return el("span", text, "badge " + known);
}

function cell(row, content, className) {
  const td = el("td", null, className);
  if (content instanceof Node) td.appendChild(content);
  else td.textContent = content === null || content === undefined ? "–" : String(content);
  row.appendChild(td);
  return td;
}

function formatTime(ms) {
  if (ms === null || ms === undefined || ms < 0) return "–";
  return new Date(ms).toISOString().replace("T", " ").replace("Z", "");
}

function formatSeconds(seconds) {
  return seconds === null || seconds === undefined ? "–" : seconds.toFixed(1);
}

function groupLink(groupId) {
  const a = el("a", groupId);
  a.href = "/ui/group.html?id=" + encodeURIComponent(groupId);
  return a;
}

async function getJson(path) {
  const response = await fetch(path, { headers: { Accept: "application/json" }, cache: "no-store" });
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

function setStatus(text) {
  document.getElementById("status").textContent = text;
}

// -- group list ------------------------------------------------------------------------------

async function renderGroups() {
  const { groups } = await getJson("/api/groups");
  const body = document.querySelector("#groups tbody");
  body.replaceChildren();
  for (const group of groups) {
    const row = el("tr");
    row.dataset.group = group.group_id;
    cell(row, groupLink(group.group_id), "id");
    cell(row, group.type);
    cell(row, badge(group.state));
    cell(row, group.protocol_name || group.protocol_type);
    cell(row, group.members, "num");
    cell(row, group.generation, "num");
    cell(row, group.lag, "num");
    cell(row, formatSeconds(group.lag_seconds), "num");
    cell(row, badge(group.status));
    cell(row, group.last_event ? group.last_event.message : null);
    body.appendChild(row);
  }
  setStatus(groups.length + " groups · lag needs gateway mode (standalone: committed offsets only) · refreshed " +
    new Date().toLocaleTimeString());
}

// -- one group -------------------------------------------------------------------------------

function summaryItem(list, name, value) {
  list.appendChild(el("dt", name));
  const dd = el("dd");
  if (value instanceof Node) dd.appendChild(value);
  else dd.textContent = value === null || value === undefined ? "–" : String(value);
  list.appendChild(dd);
}

function renderSummary(group) {
  const list = document.getElementById("summary");
  list.replaceChildren();
  summaryItem(list, "Type", group.type);
  summaryItem(list, "State", badge(group.state));
  summaryItem(list, "Protocol", group.protocol_name || group.protocol_type);
  summaryItem(list, group.type === "consumer" ? "Group epoch" : "Generation", group.generation);
  summaryItem(list, "Leader", group.leader_id);
  summaryItem(list, "Members", group.members.length);
  summaryItem(list, "Lag status", badge(group.lag ? group.lag.status : null));
}

function renderMembers(group) {
  const body = document.querySelector("#members tbody");
  body.replaceChildren();
  for (const member of group.members) {
    const row = el("tr");
    row.dataset.member = member.member_id;
    cell(row, member.member_id + (member.leader ? " (leader)" : ""), "id");
    cell(row, member.client_id, "id");
    cell(row, member.client_host);
    cell(row, member.instance_id);
    cell(row, member.member_epoch, "num");
    const parts = member.assignment === null ? "(not a consumer assignment)"
      : member.assignment.map(([topic, p]) => topic + "-" + p).join(", ");
    cell(row, parts, "id");
    body.appendChild(row);
  }
}

function renderOffsets(group) {
  document.getElementById("lag-note").textContent = group.lag_unavailable_reason || "";
  const body = document.querySelector("#offsets tbody");
  body.replaceChildren();
  for (const offset of group.offsets) {
    const row = el("tr");
    cell(row, offset.topic, "id");
    cell(row, offset.partition, "num");
    cell(row, offset.committed, "num");
    cell(row, offset.log_end, "num");
    cell(row, offset.lag, "num");
    cell(row, formatSeconds(offset.lag_seconds), "num");
    cell(row, badge(offset.status));
    cell(row, formatTime(offset.commit_ms));
    body.appendChild(row);
  }
}

function renderEvents(events) {
  const body = document.querySelector("#events tbody");
  body.replaceChildren();
  for (const event of events.slice().reverse()) {
    const row = el("tr");
    row.dataset.kind = event.kind;
    cell(row, formatTime(event.time_ms));
    cell(row, event.kind);
    cell(row, event.state);
    cell(row, event.generation, "num");
    cell(row, event.message, "id");
    body.appendChild(row);
  }
}

const BAR_START = { rebalance_started: "classic", epoch_bumped: "consumer" };
const BAR_END = { group_stable: 1, group_empty: 1, group_removed: 1, assignment_reconciled: 1 };

function rebalanceBars(events, end) {
  const bars = [];
  let open = null;
  for (const event of events) {
    if (event.kind in BAR_START) {
      if (open && open.protocol === "classic" && event.kind === "rebalance_started") continue;
      if (!open) open = { start: event.time_ms, protocol: BAR_START[event.kind], reason: event.details.reason };
    } else if (open && event.kind in BAR_END) {
      bars.push({ ...open, end: event.time_ms });
      open = null;
    }
  }
  if (open) bars.push({ ...open, end, ongoing: true });
  return bars;
}

function renderTimeline(events) {
  const box = document.getElementById("timeline");
  box.replaceChildren();
  if (events.length === 0) {
    box.appendChild(el("p", "No events recorded for this group yet.", "note"));
    return;
  }
  const lanes = [];
  for (const event of events) {
    if (event.member_id && !lanes.includes(event.member_id)) lanes.push(event.member_id);
  }
  const start = events[0].time_ms;
  const end = Math.max(events[events.length - 1].time_ms, Date.now());
  const span = Math.max(end - start, 1000);
  const labelWidth = 260, laneHeight = 22, top = 26;
  const width = Math.max(box.clientWidth - 2, 700);
  const height = top + Math.max(lanes.length, 1) * laneHeight + 24;
  const x = (t) => labelWidth + ((t - start) / span) * (width - labelWidth - 10);
  const root = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img" });
  root.appendChild(svg("title", {}, "Rebalances and member events over time"));
  let labelsEnd = 0;
  for (const bar of rebalanceBars(events, end)) {
    const x1 = x(bar.start), x2 = Math.max(x(bar.end), x1 + 3);
    const rect = svg("rect", { x: x1, y: 4, width: x2 - x1, height: height - 8, class: "bar " + bar.protocol });
    rect.appendChild(svg("title", {}, `rebalance (${bar.reason || "?"}): ${bar.end - bar.start} ms` +
      (bar.ongoing ? " so far" : "")));
    root.appendChild(rect);
    const label = bar.reason || "rebalance";
    if (x1 >= labelsEnd) {  // labels of rebalances close together would overlap: the bar's title tells
      root.appendChild(svg("text", { x: x1 + 2, y: 16, class: "bar-label" }, label));
      labelsEnd = x1 + 6 * label.length + 8;
    }
  }
  lanes.forEach((member, i) => {
    const y = top + i * laneHeight + laneHeight / 2;
    root.appendChild(svg("line", { x1: labelWidth, x2: width - 5, y1: y, y2: y, class: "lane" }));
    const label = member.length > 40 ? member.slice(0, 39) + "…" : member;
    const text = svg("text", { x: 4, y: y + 4, class: "lane-label" }, label);
    text.appendChild(svg("title", {}, member));
    root.appendChild(text);
  });
  for (const event of events) {
    if (!event.member_id) continue;
    const y = top + lanes.indexOf(event.member_id) * laneHeight + laneHeight / 2;
    const dot = svg("circle", { cx: x(event.time_ms), cy: y, r: 5, class: "dot " + event.kind.replace(/[^a-z_]/g, "") });
    dot.appendChild(svg("title", {}, formatTime(event.time_ms) + " " + event.message));
    root.appendChild(dot);
  }
  root.appendChild(svg("text", { x: labelWidth, y: height - 6, class: "axis" }, formatTime(start)));
  root.appendChild(svg("text", { x: width - 150, y: height - 6, class: "axis" }, formatTime(end)));
  box.appendChild(root);
}

async function renderGroup() {
  const groupId = new URLSearchParams(window.location.search).get("id");
  if (groupId === null) {
    setStatus("No group given: open a group from the list.");
    return;
  }
  document.getElementById("group-id").textContent = groupId;
  document.title = groupId + " · kafka-group-coordinator";
  const path = "/api/groups/" + encodeURIComponent(groupId);
  const [group, history] = await Promise.all([getJson(path), getJson(path + "/history")]);
  renderSummary(group);
  renderMembers(group);
  renderOffsets(group);
  renderTimeline(history.events);
  renderEvents(history.events);
  setStatus(history.events.length + " events · refreshed " + new Date().toLocaleTimeString());
}

function start() {
  const render = document.body.dataset.page === "group" ? renderGroup : renderGroups;
  const run = () => render().catch((error) => setStatus("Could not load: " + error.message));
  run();
  window.setInterval(run, REFRESH_MS);
}

document.addEventListener("DOMContentLoaded", start);
