(function () {
  function value(cell) {
    var text = cell.textContent.trim(), number = Number(text);
    return text !== "" && !isNaN(number) ? number : text.toLowerCase();
  }
  function compare(a, b) {
    if (typeof a === typeof b) { return a < b ? -1 : a > b ? 1 : 0; }
    return typeof a === "number" ? -1 : 1;
  }
  document.querySelectorAll("table").forEach(function (table) {
    var body = table.tBodies[0];
    if (!body || body.rows.length < 4) { return; }
    table.classList.add("sortable");
    var headers = table.tHead ? table.tHead.rows[0].cells : [];
    var long = body.rows.length > LONG, showAll = false, filter = null, more = null;
    function show() {
      var needle = filter ? filter.value.trim().toLowerCase() : "", shown = 0;
      Array.prototype.forEach.call(body.rows, function (row) {
        var match = !needle || row.textContent.toLowerCase().indexOf(needle) >= 0;
        var visible = match && (showAll || needle || shown < LONG);
        row.hidden = !visible;
        if (visible) { shown += 1; }
      });
      if (more) { more.hidden = showAll || !!needle; }
    }
    Array.prototype.forEach.call(headers, function (header, column) {
      header.setAttribute("title", "sort by this column");
      header.addEventListener("click", function () {
        var ascending = header.getAttribute("aria-sort") !== "ascending";
        Array.prototype.forEach.call(headers, function (h) { h.removeAttribute("aria-sort"); });
        header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var order = compare(value(a.cells[column]), value(b.cells[column]));
          return ascending ? order : -order;
        });
        rows.forEach(function (row) { body.appendChild(row); });
        show();
      });
    });
    if (long) {
      var box = document.createElement("div");
      box.className = "filter";
      filter = document.createElement("input");
      filter.type = "search";
      filter.placeholder = "filter " + body.rows.length + " rows";
      filter.addEventListener("input", show);
      box.appendChild(filter);
      table.parentNode.insertBefore(box, table);
      more = document.createElement("button");
      more.className = "more";
      more.textContent = "show all " + body.rows.length + " rows";
      more.addEventListener("click", function () { showAll = true; show(); });
      table.parentNode.insertBefore(more, table.nextSibling);
      show();
    }
  });
})();
