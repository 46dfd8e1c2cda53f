
pending_budget(KEYS[1], tonumber(ARGV[1]), 2)
return 1
