package taskfs

// NeedExchange is needExchange, for the tests of package taskfs_test.
var NeedExchange = needExchange
