-- wrk request generator: GET /users/ID, an ID from the hot set (1…HOT) with probability
-- HOT_SHARE, else from the cold set (1…COLD). Environment: HOT, COLD, HOT_SHARE.
local hot = tonumber(os.getenv("HOT") or "1000")
local cold = tonumber(os.getenv("COLD") or "20000")
local hot_share = tonumber(os.getenv("HOT_SHARE") or "0.9")
local threads = 0

function setup(thread)
    threads = threads + 1
    thread:set("index", threads)
end

function init(args)
    -- Each thread has its own Lua state: seed each differently.
    math.randomseed(os.time() * 100 + (index or 0))
end

function request()
    local id
    if math.random() < hot_share then id = math.random(1, hot) else id = math.random(1, cold) end
    return wrk.format("GET", "/users/" .. id)
end
