package queue

// NeedExchange is needExchange, for the tests of package queue_test.
var NeedExchange = needExchange
