package io.kvroute.tokenizer.hf.internal;

import java.time.ZonedDateTime;
import java.time.format.TextStyle;
import java.time.temporal.ChronoField;
import java.time.temporal.IsoFields;
import java.util.Locale;

/**
 * Python's {@code datetime.strftime} in the C locale, for the {@code strftime_now} global that
 * transformers gives chat templates (Llama 3.x prints {@code "%d %b %Y"}). Stateless.
 */
final class Strftime {
  private Strftime() {}

  static String format(String fmt, ZonedDateTime t) {
    StringBuilder sb = new StringBuilder();
    for (int k = 0; k < fmt.length(); k++) {
      char c = fmt.charAt(k);
      if (c != '%' || k + 1 >= fmt.length()) {
        sb.append(c);
        continue;
      }
      char d = fmt.charAt(++k);
      switch (d) {
        case 'Y' -> sb.append(t.getYear());
        case 'y' -> sb.append(two(t.getYear() % 100));
        case 'm' -> sb.append(two(t.getMonthValue()));
        case 'd' -> sb.append(two(t.getDayOfMonth()));
        case 'e' -> sb.append(t.getDayOfMonth() < 10 ? " " : "").append(t.getDayOfMonth());
        case 'H' -> sb.append(two(t.getHour()));
        case 'I' -> sb.append(two(t.getHour() % 12 == 0 ? 12 : t.getHour() % 12));
        case 'M' -> sb.append(two(t.getMinute()));
        case 'S' -> sb.append(two(t.getSecond()));
        case 'f' -> sb.append(String.format("%06d", t.getNano() / 1000));
        case 'p' -> sb.append(t.getHour() < 12 ? "AM" : "PM");
        case 'b', 'h' -> sb.append(t.getMonth().getDisplayName(TextStyle.SHORT, Locale.ENGLISH));
        case 'B' -> sb.append(t.getMonth().getDisplayName(TextStyle.FULL, Locale.ENGLISH));
        case 'a' -> sb.append(t.getDayOfWeek().getDisplayName(TextStyle.SHORT, Locale.ENGLISH));
        case 'A' -> sb.append(t.getDayOfWeek().getDisplayName(TextStyle.FULL, Locale.ENGLISH));
        case 'j' -> sb.append(String.format("%03d", t.getDayOfYear()));
        case 'w' -> sb.append(t.getDayOfWeek().getValue() % 7);
        case 'u' -> sb.append(t.getDayOfWeek().getValue());
        case 'V' -> sb.append(two(t.get(IsoFields.WEEK_OF_WEEK_BASED_YEAR)));
        case 'G' -> sb.append(t.get(IsoFields.WEEK_BASED_YEAR));
        case 'z' -> {
          int secs = t.getOffset().getTotalSeconds();
          sb.append(secs < 0 ? '-' : '+')
              .append(two(Math.abs(secs) / 3600))
              .append(two(Math.abs(secs) / 60 % 60));
        }
        case 'Z' -> sb.append(t.getZone().getDisplayName(TextStyle.SHORT, Locale.ENGLISH));
        case 's' -> sb.append(t.toEpochSecond());
        case 'D' -> sb.append(format("%m/%d/%y", t));
        case 'F' -> sb.append(format("%Y-%m-%d", t));
        case 'T' -> sb.append(format("%H:%M:%S", t));
        case 'R' -> sb.append(format("%H:%M", t));
        case 'c' -> sb.append(format("%a %b %e %H:%M:%S %Y", t));
        case 'x' -> sb.append(format("%m/%d/%y", t));
        case 'X' -> sb.append(format("%H:%M:%S", t));
        case 'U' -> {
          int yday = t.get(ChronoField.DAY_OF_YEAR) - 1;
          int wday = t.getDayOfWeek().getValue() % 7;
          sb.append(two((yday + 7 - wday) / 7));
        }
        case 'W' -> {
          int yday = t.get(ChronoField.DAY_OF_YEAR) - 1;
          int wday = (t.getDayOfWeek().getValue() + 6) % 7;
          sb.append(two((yday + 7 - wday) / 7));
        }
        case '%' -> sb.append('%');
        default -> sb.append('%').append(d);
      }
    }
    return sb.toString();
  }

  private static String two(int v) {
    return v < 10 ? "0" + v : Integer.toString(v);
  }
}
