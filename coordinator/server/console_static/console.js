// The console: reads the JSON API and builds the DOM with textContent only (group, member and
// client ids are attacker-controlled strings and must never be parsed as HTML).
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const REFRESH_MS = 5000;
const FETCH_TIMEOUT_MS = 15000;  // an API call that takes longer is reported as failed
const SLOW_MS = 1500;  // after this, the status line says the coordinator is slow to answer
const MIN_SPAN_MS = 50;  // the shortest time axis of a timeline

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

// Lag the API does not know is null: shown as "unknown", never as 0.
function formatSeconds(seconds) {
  return seconds === null || seconds === undefined ? "unknown" : seconds.toFixed(1);
}

function formatLag(records) {
  return records === null || records === undefined ? "unknown" : records;
}

function formatDuration(ms) {
  const abs = Math.abs(ms);
  if (abs < 1000) return Math.round(abs) + " ms";
  if (abs < 120000) return (abs / 1000).toFixed(1) + " s";
  if (abs < 7200000) return Math.round(abs / 60000) + " min";
  return (abs / 3600000).toFixed(1) + " h";
}

function groupLink(groupId) {
  const a = el("a", groupId);
  a.href = "/ui/group.html?id=" + encodeURIComponent(groupId);
  return a;
}

function topicLink(topic) {
  const a = el("a", topic);
  a.href = "/ui/topic.html?name=" + encodeURIComponent(topic);
  return a;
}

async function getJson(path) {
  const abort = new AbortController();
  const timer = window.setTimeout(() => abort.abort(), FETCH_TIMEOUT_MS);
  let response;
  try {
    response = await fetch(path, { headers: { Accept: "application/json" }, cache: "no-store", signal: abort.signal });
  } catch (error) {
    throw new Error(error.name === "AbortError" ? "no answer from the coordinator in " +
      FETCH_TIMEOUT_MS / 1000 + " s" : "the coordinator cannot be reached (" + error.message + ")");
  } finally {
    window.clearTimeout(timer);
  }
  let body = null;
  try {
    body = await response.json();
  } catch (error) {
    body = null;
  }
  if (!response.ok) throw new Error((body && body.error) || response.status + " " + response.statusText);
  if (body === null) throw new Error("the API answered with something that is not JSON");
  return body;
}

function setStatus(text, isError) {
  const status = document.getElementById("status");
  status.textContent = text;
  status.classList.toggle("error", Boolean(isError));
}

// A table body that says what it waits for (or what failed) until its data arrives.
function placeholder(tableId, text, isError) {
  const body = document.querySelector("#" + tableId + " tbody");
  const columns = document.querySelectorAll("#" + tableId + " thead th").length;
  const row = el("tr", null, "placeholder");
  const td = el("td", text, isError ? "error" : "note");
  td.colSpan = columns;
  row.appendChild(td);
  body.replaceChildren(row);
}

// Runs the page's loads: the status line tells what is still awaited and for how long, and
// every failure is shown where its data would be.
function tracked(loads, describe) {
  const started = Date.now();
  const pending = new Set(loads.map((load) => load.name));
  const failures = [];
  const tick = window.setInterval(() => {
    if (pending.size === 0) return;
    const waited = Date.now() - started;
    if (waited >= SLOW_MS) {
      setStatus("Still waiting for the coordinator (" + formatDuration(waited) + "): " +
        Array.from(pending).join(", ") + "…");
    }
  }, 500);
  return Promise.all(loads.map((load) => load.run().then(
    () => pending.delete(load.name),
    (error) => {
      pending.delete(load.name);
      failures.push(load.name + ": " + error.message);
      if (load.onError) load.onError(error);
    },
  ))).then(() => {
    window.clearInterval(tick);
    if (failures.length) setStatus("Could not load " + failures.join("; "), true);
    else setStatus(describe() + " · refreshed " + new Date().toLocaleTimeString());
  });
}

// -- group list ------------------------------------------------------------------------------

async function renderGroups() {
  const overview = await getJson("/api/groups");
  const groups = overview.groups;
  const body = document.querySelector("#groups tbody");
  body.replaceChildren();
  for (const group of groups) {
    const row = el("tr");
    row.dataset.group = group.group_id;
    cell(row, groupLink(group.group_id), "id");
    cell(row, group.type);
    cell(row, badge(group.state));
    cell(row, group.protocol_type);
    cell(row, group.assignor);
    cell(row, group.members, "num");
    cell(row, group.generation, "num");
    cell(row, formatLag(group.lag), "num");
    cell(row, formatSeconds(group.lag_seconds), "num");
    cell(row, badge(group.status));
    cell(row, group.last_event ? group.last_event.message : null);
    body.appendChild(row);
  }
  if (groups.length === 0) placeholder("groups", "No groups yet.");
  document.getElementById("mode").textContent = overview.mode + " mode";
  const parts = [groups.length + " groups"];
  if (overview.lag_hint) parts.push(overview.lag_hint);
  setStatus(parts.join(" · ") + " · refreshed " + new Date().toLocaleTimeString());
}

// -- topics ----------------------------------------------------------------------------------

async function renderTopics() {
  const { topics, mode } = await getJson("/api/topics");
  const body = document.querySelector("#topics tbody");
  body.replaceChildren();
  for (const topic of topics) {
    const row = el("tr");
    row.dataset.topic = topic.topic;
    cell(row, topicLink(topic.topic), "id");
    cell(row, topic.partitions, "num");
    cell(row, topic.groups, "num");
    cell(row, formatLag(topic.lag), "num");
    cell(row, formatSeconds(topic.lag_seconds), "num");
    body.appendChild(row);
  }
  if (topics.length === 0) placeholder("topics", "No topics yet.");
  document.getElementById("mode").textContent = mode + " mode";
  setStatus(topics.length + " topics · refreshed " + new Date().toLocaleTimeString());
}

function renderTopicPage() {
  const name = new URLSearchParams(window.location.search).get("name");
  if (name === null) {
    setStatus("No topic given: open a topic from the list.", true);
    return null;
  }
  document.getElementById("topic-name").textContent = name;
  document.title = name + " · kafka-group-coordinator";
  placeholder("topic-groups", "Waiting for the coordinator…");
  placeholder("partitions", "Waiting for the coordinator…");
  let topic = null;
  return () => tracked([{
    name: "topic",
    run: async () => {
      topic = await getJson("/api/topics/" + encodeURIComponent(name));
      renderTopic(topic);
    },
    onError: (error) => {
      if (topic === null) {
        placeholder("topic-groups", "Could not load: " + error.message, true);
        placeholder("partitions", "Could not load: " + error.message, true);
      }
    },
  }], () => topic.groups.length + " groups consume " + topic.partitions + " partitions");
}

function renderTopic(topic) {
  const list = document.getElementById("summary");
  list.replaceChildren();
  summaryItem(list, "Partitions", topic.partitions);
  summaryItem(list, "Groups", topic.groups.length);
  summaryItem(list, "Total lag", formatLag(topic.lag));
  summaryItem(list, "Max lag (s)", formatSeconds(topic.lag_seconds));
  summaryItem(list, "Mode", topic.mode);
  document.getElementById("lag-note").textContent = topic.lag_note || "";

  const body = document.querySelector("#topic-groups tbody");
  body.replaceChildren();
  for (const group of topic.groups) {
    const row = el("tr");
    row.dataset.group = group.group_id;
    cell(row, groupLink(group.group_id), "id");
    cell(row, group.type);
    cell(row, badge(group.state));
    cell(row, group.members, "num");
    cell(row, group.assigned_partitions, "num");
    cell(row, group.committed_partitions, "num");
    cell(row, formatLag(group.lag), "num");
    cell(row, formatSeconds(group.lag_seconds), "num");
    cell(row, badge(group.status));
    body.appendChild(row);
  }
  if (topic.groups.length === 0) placeholder("topic-groups", "No group consumes this topic.");

  const head = document.querySelector("#partitions thead tr");
  head.replaceChildren(el("th", "Partition"), el("th", "Log end"));
  for (const group of topic.groups) {
    const th = el("th", group.group_id + " committed / lag", "id");
    head.appendChild(th);
  }
  const rows = document.querySelector("#partitions tbody");
  rows.replaceChildren();
  for (const partition of topic.partition_rows) {
    const row = el("tr");
    row.dataset.partition = partition.partition;
    cell(row, partition.partition, "num");
    cell(row, partition.log_end, "num");
    for (const group of topic.groups) {
      const on = partition.groups[group.group_id];
      const committed = on.committed === null ? "–" : on.committed;
      cell(row, committed + " / " + formatLag(on.lag), "num");
    }
    rows.appendChild(row);
  }
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
  summaryItem(list, "Protocol type", group.protocol_type);
  summaryItem(list, "Assignor", group.assignor);
  summaryItem(list, group.type === "consumer" ? "Group epoch" : "Generation", group.generation);
  summaryItem(list, "Leader", group.leader_id);
  summaryItem(list, "Members", group.members.length);
  summaryItem(list, "Lag status", badge(group.lag ? group.lag.status : null));
}

function ago(ms, now) {
  if (ms === null || ms === undefined) return "–";
  return formatDuration(now - ms) + " ago";
}

function until(ms, now) {
  if (ms === null || ms === undefined) return "–";
  return ms >= now ? "in " + formatDuration(ms - now) : formatDuration(now - ms) + " overdue";
}

function renderMembers(group) {
  const body = document.querySelector("#members tbody");
  body.replaceChildren();
  const now = group.now_ms;
  for (const member of group.members) {
    const row = el("tr");
    row.dataset.member = member.member_id;
    row.dataset.liveness = member.liveness || "";
    cell(row, member.client_id, "id");
    cell(row, member.member_id + (member.leader ? " (leader)" : ""), "id small");
    cell(row, member.client_host);
    cell(row, member.instance_id);
    cell(row, member.member_epoch, "num");
    const heard = cell(row, ago(member.last_heartbeat_ms, now), "num");
    heard.title = formatTime(member.last_heartbeat_ms);
    const deadline = cell(row, until(member.session_deadline_ms, now), "num");
    deadline.title = formatTime(member.session_deadline_ms);
    const live = cell(row, badge(member.liveness));
    if (member.liveness === "late") {
      live.title = "no heartbeat for more than " + formatDuration(member.late_after_ms) +
        ": the member keeps its partitions until its session deadline";
    }
    const parts = member.assignment === null ? "(not a consumer assignment)"
      : member.assignment.map(([topic, p]) => topic + "-" + p).join(", ");
    cell(row, parts, "id");
    body.appendChild(row);
  }
  if (group.members.length === 0) placeholder("members", "No members.");
}

function renderOffsets(group) {
  document.getElementById("lag-note").textContent = group.lag_unavailable_reason || "";
  const body = document.querySelector("#offsets tbody");
  body.replaceChildren();
  for (const offset of group.offsets) {
    const row = el("tr");
    cell(row, topicLink(offset.topic), "id");
    cell(row, offset.partition, "num");
    cell(row, offset.committed, "num");
    cell(row, offset.log_end, "num");
    cell(row, formatLag(offset.lag), "num");
    cell(row, formatSeconds(offset.lag_seconds), "num");
    cell(row, badge(offset.status));
    cell(row, formatTime(offset.commit_ms));
    body.appendChild(row);
  }
  if (group.offsets.length === 0) placeholder("offsets", "No committed offsets.");
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
  if (events.length === 0) placeholder("events", "No events recorded for this group yet.");
}

const BAR_START = { rebalance_started: "classic", epoch_bumped: "consumer" };
const BAR_END = { group_stable: 1, group_empty: 1, group_removed: 1, assignment_reconciled: 1 };

function rebalanceBars(events, now) {
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
  if (open) bars.push({ ...open, end: now, ongoing: true });
  return bars;
}

// Lane labels: the client id each member joined with (the member id, opaque for KIP-848
// members, is in the label's tooltip); a client id shared by several members gets a number.
function laneLabels(lanes, events, members) {
  const clientOf = new Map();
  for (const event of events) {
    if (event.member_id && event.details && typeof event.details.client_id === "string") {
      clientOf.set(event.member_id, event.details.client_id);
    }
  }
  for (const member of members || []) clientOf.set(member.member_id, member.client_id);
  const labels = lanes.map((member) => clientOf.get(member) || member);
  const seen = new Map();
  for (const label of labels) seen.set(label, (seen.get(label) || 0) + 1);
  const numbered = new Map();
  return labels.map((label) => {
    if (seen.get(label) === 1) return label;
    const n = (numbered.get(label) || 0) + 1;
    numbered.set(label, n);
    return label + " #" + n;
  });
}

function renderTimeline(events, members) {
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
  const labels = laneLabels(lanes, events, members);
  // The axis spans the events (and an ongoing rebalance up to now), with a small margin: not the
  // time since the first event, which leaves an idle group's timeline mostly empty.
  const now = Date.now();
  const bars = rebalanceBars(events, now);
  const first = events[0].time_ms;
  let last = events[events.length - 1].time_ms;
  for (const bar of bars) last = Math.max(last, bar.end);
  // A burst of events (a group formed in a few ms) still gets an axis of a few ticks.
  const margin = Math.max((last - first) * 0.03, 20);
  const start = first - margin, end = Math.max(last + margin, start + MIN_SPAN_MS);
  const span = end - start;
  const longest = labels.reduce((n, label) => Math.max(n, label.length), 0);
  const labelWidth = Math.min(Math.max(longest * 7 + 16, 90), 260), laneHeight = 22, top = 26;
  const width = Math.max(box.clientWidth - 2, 700);
  const height = top + Math.max(lanes.length, 1) * laneHeight + 26;
  const x = (t) => labelWidth + ((t - start) / span) * (width - labelWidth - 10);
  const root = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img" });
  root.appendChild(svg("title", {}, "Rebalances and member events over time"));
  for (let i = 0; i <= 4; i++) {  // ticks: time since the first event
    const t = first + ((end - margin - first) * i) / 4;
    root.appendChild(svg("line", { x1: x(t), x2: x(t), y1: top - 6, y2: height - 20, class: "tick" }));
    const text = i === 0 ? formatTime(first) : "+" + formatDuration(t - first);
    const anchor = i === 4 ? { x: x(t) - 2, "text-anchor": "end" } : { x: x(t) + 2 };
    root.appendChild(svg("text", { ...anchor, y: height - 6, class: "axis" }, text));
  }
  let labelsEnd = 0;
  for (const bar of bars) {
    const x1 = x(bar.start), x2 = Math.max(x(bar.end), x1 + 3);
    const rect = svg("rect", { x: x1, y: 4, width: x2 - x1, height: height - 26, class: "bar " + bar.protocol });
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
    const label = labels[i].length > 36 ? labels[i].slice(0, 35) + "…" : labels[i];
    const text = svg("text", { x: 4, y: y + 4, class: "lane-label" }, label);
    text.dataset.member = member;
    text.appendChild(svg("title", {}, labels[i] + " · member " + member));
    root.appendChild(text);
  });
  for (const event of events) {
    if (!event.member_id) continue;
    const y = top + lanes.indexOf(event.member_id) * laneHeight + laneHeight / 2;
    const dot = svg("circle", { cx: x(event.time_ms), cy: y, r: 5, class: "dot " + event.kind.replace(/[^a-z_]/g, "") });
    dot.appendChild(svg("title", {}, formatTime(event.time_ms) + " " + event.message));
    root.appendChild(dot);
  }
  box.appendChild(root);
}

function renderGroupPage() {
  const groupId = new URLSearchParams(window.location.search).get("id");
  if (groupId === null) {
    setStatus("No group given: open a group from the list.", true);
    return null;
  }
  document.getElementById("group-id").textContent = groupId;
  document.title = groupId + " · kafka-group-coordinator";
  for (const table of ["members", "offsets", "events"]) placeholder(table, "Waiting for the coordinator…");
  document.getElementById("timeline").replaceChildren(el("p", "Waiting for the coordinator…", "note"));
  setStatus("Fetching group " + groupId + "…");
  const path = "/api/groups/" + encodeURIComponent(groupId);
  let group = null, events = null;
  const drawTimeline = () => {
    if (events !== null) renderTimeline(events, group ? group.members : []);
  };
  // The group and its history load independently: each part shows as soon as it arrives.
  return () => tracked([
    {
      name: "group",
      run: async () => {
        group = await getJson(path);
        renderSummary(group);
        renderMembers(group);
        renderOffsets(group);
        drawTimeline();
      },
      onError: (error) => {
        if (group !== null) return;  // keep the last good data on a failed refresh
        for (const table of ["members", "offsets"]) placeholder(table, "Could not load: " + error.message, true);
      },
    },
    {
      name: "history",
      run: async () => {
        events = (await getJson(path + "/history")).events;
        drawTimeline();
        renderEvents(events);
      },
      onError: (error) => {
        if (events !== null) return;
        placeholder("events", "Could not load: " + error.message, true);
        document.getElementById("timeline").replaceChildren(el("p", "Could not load: " + error.message, "error"));
      },
    },
  ], () => (events ? events.length : 0) + " events");
}

// -- start -----------------------------------------------------------------------------------

function start() {
  const page = document.body.dataset.page;
  let run;
  if (page === "group") run = renderGroupPage();
  else if (page === "topic") run = renderTopicPage();
  else {
    const render = page === "topics" ? renderTopics : renderGroups;
    run = () => render().catch((error) => setStatus("Could not load: " + error.message, true));
  }
  if (run === null) return;
  let busy = false;
  const once = () => {
    if (busy) return;  // a slow coordinator: no second request while one is pending
    busy = true;
    run().finally(() => { busy = false; });
  };
  once();
  window.setInterval(once, REFRESH_MS);
}

document.addEventListener("DOMContentLoaded", start);
