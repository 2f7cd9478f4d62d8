// Starts dynalite (in memory) on 127.0.0.1 at a free port and prints the
// port on stdout; awstest.Dynalite runs it and stops it (by closing its
// stdin) when the test ends.
const dynalite = require('dynalite');
const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`listening ${server.address().port}\n`);
});
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
