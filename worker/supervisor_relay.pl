# marsh: the relay between an operation's FIFOs and its branch's pipes, for
# the supervisor (worker/supervisor.pl), which loads this file only for an
# operation (`do`: the same package; fail and uptime are the supervisor's).
#
# Why a relay and not the FIFOs as the branch's own fds: a reader that goes
# away then costs the rest of its stream, never the branch (which would die
# of SIGPIPE), and no open waits on another. A relay is
# [source, destination, buffer, name, bytes delivered]: stdin (the FIFO to
# the branch's pipe), stdout and stderr (the branch's pipes to the FIFOs).
use strict;

my ($EINTR, $ENXIO, $EAGAIN, $F_GETFL, $F_SETFL, $O_NONBLOCK) = (4, 6, 11, 3, 4, 0x800);

# An operation's FIFOs (protocol/worker.ts StdioFifos), opened without
# waiting on one before another, since the caller may open its ends in any
# order: stdin for reading at once (a FIFO's reader never waits), which lets
# the caller's writer open whenever it comes; stdout and stderr for writing
# as soon as a reader is there, tried every 20 ms until $fifo_ms. Returns the
# branch's ends of its stdin, stdout and stderr pipes, and the relays.
sub open_fifos {
  my ($fifo_in, $fifo_out, $fifo_err, $fifo_ms, $open_flags) = @_;
  my $deadline = uptime() + $fifo_ms / 1000;
  my $flags = $O_NONBLOCK | $open_flags;
  sysopen(my $fin, $fifo_in, $flags) or fail("cannot open the stdin FIFO $fifo_in: $!");
  -p $fin or fail("$fifo_in is not a FIFO");
  my %out = (stdout => [$fifo_out, undef], stderr => [$fifo_err, undef]);
  for (;;) {
    for my $name (sort keys %out) {
      my $o = $out{$name};
      next if defined $o->[1];
      if (sysopen(my $fh, $o->[0], 1 | $flags)) {
        -p $fh or fail("$o->[0] is not a FIFO");
        $o->[1] = $fh;
      } elsif (($! + 0) != $ENXIO) {
        fail("cannot open the $name FIFO $o->[0]: $!");
      }
    }
    my @waiting = grep { !defined $out{$_}[1] } sort keys %out;
    last unless @waiting;
    if (uptime() >= $deadline) {
      my $w = $waiting[0];
      fail("nothing opened the $w FIFO $out{$w}[0] for reading within "
          . ($fifo_ms / 1000)
          . ' s: the command that made it is gone or stuck; nothing was run');
    }
    select(undef, undef, undef, 0.02);
  }
  pipe(my $in_r, my $in_w) or fail("pipe: $!");
  pipe(my $out_r, my $out_w) or fail("pipe: $!");
  pipe(my $err_r, my $err_w) or fail("pipe: $!");
  for my $fh ($in_w, $out_r, $err_r) {
    my $fl = fcntl($fh, $F_GETFL, 0);
    defined $fl && fcntl($fh, $F_SETFL, $fl | $O_NONBLOCK) or fail("cannot make a pipe non-blocking: $!");
  }
  my @relays = (
    [$fin, $in_w, '', 'stdin', 0],
    [$out_r, $out{stdout}[1], '', 'stdout', 0],
    [$err_r, $out{stderr}[1], '', 'stderr', 0],
  );
  return ($in_r, $out_w, $err_w, \@relays);
}

# Which relay descriptors select waits on: a source when its buffer is empty,
# a destination when its buffer is not.
sub relay_wants {
  my ($relays, $rin, $win) = @_;
  for my $r (@$relays) {
    my ($src, $dst, $buf) = @$r;
    vec($$rin, fileno($src), 1) = 1 if defined $src && $buf eq '';
    vec($$win, fileno($dst), 1) = 1 if defined $dst && $buf ne '';
  }
}

# Moves what select found ready. A reader gone (EPIPE) loses the rest of its
# stream, read and dropped so the branch never blocks on it; the branch is
# not stopped for it. A source's end closes its destination once flushed.
sub relay_move {
  my ($relays, $rout) = @_;
  for my $r (@$relays) {
    if (defined $r->[0] && $r->[2] eq '' && vec($rout, fileno($r->[0]), 1)) {
      my $got = sysread($r->[0], my $chunk, 65536);
      if ($got) {
        $r->[2] = $chunk if defined $r->[1];
      } elsif (defined $got || (($! + 0) != $EAGAIN && ($! + 0) != $EINTR)) {
        close($r->[0]);
        $r->[0] = undef;
      }
    }
    if (defined $r->[1] && $r->[2] ne '') {
      my $n = syswrite($r->[1], $r->[2]);
      if (defined $n) {
        substr($r->[2], 0, $n, '');
        $r->[4] += $n;
      } elsif (($! + 0) != $EAGAIN && ($! + 0) != $EINTR) {
        relay_drop($r);
        # Nothing reads the branch's stdin any more: its writer learns so.
        relay_close($r) if $r->[3] eq 'stdin';
      }
    }
    relay_drop($r) if !defined $r->[0] && $r->[2] eq '';
  }
}

# Drops a relay's destination and what it had not delivered.
sub relay_drop {
  my ($r) = @_;
  close($r->[1]) if defined $r->[1];
  $r->[1] = undef;
  $r->[2] = '';
}

sub relay_close {
  my ($r) = @_;
  relay_drop($r);
  close($r->[0]) if defined $r->[0];
  $r->[0] = undef;
}

1;
