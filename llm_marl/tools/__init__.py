"""Tools agents and environments use: code sandboxes, search engines, page browsing, tool calls."""
