"""Reading a question: what it asks, before any search is made.

Pure reading and small index look-ups (FTS over names and text), no model call and no search:

* **What it is.** ``checked_question`` makes it single-spaced and refuses an empty, overlong or
  undecodable one (``UsageError``).
* **Which words ask nothing.** ``global_question`` and ``content_stop`` give the words a global,
  local or basic search leaves out (generic, function and other languages' words), and
  ``broad_words`` the words that make a question a broad one.
* **Which names.** ``named_entities`` are the entities of the index all of whose name words the
  question has, a name repeating a word ("Humbert Humbert") written whole (of those, the ones
  it asks about, not the shorter names inside those it writes, are ``local_search.anchors``);
  ``unknown_names`` those it writes capitalised that no text or entity of the index has, or
  whose words it has but never together ("Zeno Ulmard" beside "Zeno Ulmford" and "Greta
  Ulmard"), or two or more words in a row written in lower case that the index has in no form,
  in a question asking nothing else ("who is ada osk?"; only for an extractive answer: with a
  model they may be a topic the index words otherwise), ``near_names`` the names of the index
  closest to one, ``missing_words`` the words of those a search leaves out, and ``asks_more``
  whether it asks anything beyond them.
* **Which mode** (``choose_mode``, for ``auto``): a question that names entities of the index
  (all the words of an entity's name appear in it, found through FTS over names) goes to local
  search, one with global cue words ("themes", "overall", "main", "summarize" ...) to global
  search; when both appear the side with more evidence wins (a name written counts once, however
  many entities of its parts the index has: the names local search anchors on) and ties go
  global, but for a tie of summary cues only ("Summarize Rosalind Joroux": a summary of what it
  names, local); a question with
  neither goes global when it has no word but generic and function ones ("What are my notes
  about?", "¿De qué tratan mis notas?", whose "de" is a word of "Roger de Coverley"), else local
  if FTS finds entities at all, else global. The choice and its reason are returned.
"""

from __future__ import annotations

import difflib
import itertools
import json
import re
import unicodedata
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from streamrag import extractive, ids, local_search
from streamrag.errors import UsageError
from streamrag.terminal import terminal_text
from streamrag.terms import INVISIBLE_TABLE, unspaced_chars, words

if TYPE_CHECKING:
    from streamrag.store import Store

MAX_QUESTION_WORDS = 1000
MAX_QUESTION_CHARS = 12_000
GLOBAL_CUES = frozenset("""
theme themes overall main across summarize summarise summary summaries overview trends trend
common general whole collection corpus dataset documents topics topic key major broad patterns
overarching recurring principal dominant
principaux principales tendances thema themen hauptthema hauptthemen uberblick zusammenfassung
insgesamt allgemein tema temas resumen tendencias generales
principais topicos assuntos resumo resuma sintese
temi principali argomenti riassunto riassumi sintesi panoramica tendenze
темы тема основные основных главные главных обзор резюме тенденции итоги
المواضيع مواضيع الموضوعات موضوعات الرئيسية ملخص لخص تلخيص الاتجاهات
主题 主要 总体 整体 总结 概述 概括 趋势 主題 全体 要約 概要 傾向 주제 요약 전체 개요 경향
""".split())   # the same in French, German, Spanish, Portuguese, Italian, Russian and Arabic
# (accents folded, as ``terms.words`` does; none that is an English word too, "resume", nor one
# a question about one thing asks with: "general", "visao" (a vision), "assunto", "argomento" or
# "موضوع" (the subject of a letter), "الرئيسي" (المقر الرئيسي, the head office)), then Chinese,
# Japanese and Korean
# Cues that ask for a summary of their object: where a question names something, of that thing
# ("Summarize Rosalind Joroux", "Give an overview of the Kessel Bridge"), which its neighbourhood
# answers; "themes", "trends", "topics" ask what recurs across passages, which reports answer.
SUMMARY_CUES = frozenset("""
summarize summarise summary summaries overview uberblick zusammenfassung resumen resumo resuma
sintese riassunto riassumi sintesi panoramica обзор резюме ملخص لخص تلخيص 总结 概述 概括 要約 概要 요약 개요
""".split())
# Words a question about the collection uses without naming what it is about: with the cues and
# stopwords gone, a question left with no word ("What do the texts say overall?") is broad.
GENERIC_WORDS = GLOBAL_CUES | frozenset("""
report reports text texts file files document doc docs story stories book books note notes
content contents material materials writing writings say says said tell told talk talks discuss
discussed discusses mention mentioned mentions describe described describes cover covered covers
idea ideas thing things stuff
news article articles paper papers essay essays post posts page pages email emails mail message
messages chat chats transcript transcripts entry entries record records memo memos letter letters
chapter chapters section sections narrative plot folder folders archive archives corpus
journal journals diary diaries
""".split())
# Words a broad question asks about the collection with and a specific one asks about something
# in it with: generic only when the question has no other word left ("Who are the main
# characters?", "Summarize everything", "What is the moral of the story?"), so that "Who is the
# main character's sister?" and "What do the people in Camden Town eat?" keep them.
COLLECTION_WORDS = frozenset("""
everything everyone everybody character characters people person persons moral morals lesson
lessons event events going
""".split())
# The same in French, German, Spanish, Portuguese, Italian and Russian (accents folded), for a
# question that does not read as English (``global_question``), with the words for what happens
# ("Que se passe-t-il ?", as "happen" is an English stop word) and for the story, which is
# history too ("l'histoire de Camden Town"): "Quels sont les personnages principaux ?" searched
# "personnages" and found nothing. ("tout", "alles", "todo", "tudo", "tutto", "все" are
# ``FOREIGN_WORDS`` already; many of these are English words too, "person", "moral", "passe".)
FOREIGN_COLLECTION_WORDS = frozenset("""
tous toutes personnage personnages personne personnes gens morale morales lecon lecons evenement
evenements histoire histoires recit recits passe
alle jeder jede figur figuren hauptfigur hauptfiguren person personen hauptperson hauptpersonen
charakter charaktere leute menschen moral lehre lehren ereignis ereignisse geschichte geschichten
passiert geschieht geschah
todos todas personaje personajes protagonista protagonistas persona personas gente moraleja leccion
lecciones evento eventos acontecimiento acontecimientos suceso sucesos historia historias relato
relatos pasa paso sucede sucedio
personagem personagens pessoa pessoas licao licoes acontece aconteceu
personaggio personaggi persone lezione lezioni eventi avvenimento avvenimenti storia storie
racconto racconti succede successo accade accaduto
персонаж персонажи персонажей герой герои героев люди людей человек мораль урок уроки уроков
персонажах героях событие события событий событиях людях история истории рассказ происходит
произошло случилось
""".split())
# Words asking how things relate, not what about: "how is Bob connected to Scrooge?" is about Bob
# and Scrooge, and a sentence that merely says "connected" answers nothing.
RELATION_WORDS = frozenset("""
connected connection connections connect related relation relations relationship relationships
relate linked link links involved involvement role roles play plays played associated association
""".split())
# The function and generic words of the other languages GLOBAL_CUES speaks: with English
# stopwords only, "Quels sont les thèmes principaux ?" kept "quels sont les", "主要主题是什么？"
# the pairs 要主 题是 是什 什么, which no report has, and the broad question found nothing.
# (Accents folded. Left out only of a question that does not read as English: many are English
# words too, "hay", "ensemble", "con". In the scripts without spaces they are cut out of the
# question, its character pairs straddling them: ``global_question``; never one character alone,
# which is part of many words, 何 of the name 何伟.)
FOREIGN_WORDS = frozenset("""
quels quelles quel quelle sont est les des une un le la du de et ce ces cette qui que quoi dans sur
avec au aux il elle ils elles se ou comment pourquoi leur leurs ensemble textes fichiers rapports
documents sujets principal principale parle parlent traite traitent resumez tout
was sind ist der das dem des ein eine einen und oder welche welcher welches wer wie wo warum gibt es
im von zu mit auf haupt dokumente texte dateien berichte notizen sammlung worum wovon geht handelt
handeln fasse zusammen alles
cuales cual es los las el lo del que quien quienes como donde por para con en unos unas sus su hay
documentos textos archivos informes notas coleccion principal principales trata tratan habla hablan
todo
quais qual sao os do da dos das em no na nos nas um uma uns umas quem onde porque sobre seu sua seus
suas ha existem todos todas arquivos relatorios colecao conteudo faca fale diga descreva explique
tratam falam tudo
quali quale sono il gli di della dello dei degli delle uno che chi cosa dove perche sul sulla nei nel
nella tra fra questi questo queste tutti tutte ci documenti testi rapporti raccolta principale
contenuto dimmi parlami descrivi spiega fai parla parlano tratta trattano tutto
каковы каков какова какие какой какая что кто где как почему это эти этих об по из на для со про все
всех весь всё есть ли такой такая такое такие документы документов тексты текстов файлы файлов отчеты отчёты отчетов
отчётов заметки заметок коллекция коллекции документах текстах файлах отчетах отчётах заметках
темах расскажи расскажите опиши опишите сделай сделайте дай дайте чём чем
ما هي هو ماذا من في على عن الى إلى هل كيف اين أين لماذا التي الذي هذه هذا كل جميع الوثائق
المستندات النصوص الملفات التقارير الملاحظات المجموعة أهم اهم صف اشرح
什么 哪些 哪个 是什么 有哪些 文档 文件 文本 资料 报告 所有 内容
何 なに どんな どの 主な テーマ 文書 ファイル 資料 全体 について ですか です ます は何 何か 何が 何を
ありますか でしょうか
주요 무엇 무엇입니까 입니까 습니까 인가요 무엇인가요 뭔가요 어떤 있나요 문서 파일 자료 내용 모든
""".split())
# Their possessive determiners, function words as "my" and "our" are in English: "Quels sont les
# thèmes principaux de mes notes ?" kept "mes" and found nothing. (Arabic writes its own as an
# ending of the noun, ملاحظاتي.)
POSSESSIVES = frozenset("""
mon ma mes ton ta tes sa ses notre nos votre vos
mein meine meinen meinem meiner meines unser unsere unseren unserem unserer unseres dein deine
deinen deinem deiner euer eure euren eurem ihr ihre ihren ihrem ihrer seinen seinem seiner
mi mis tu tus nuestro nuestra nuestros nuestras vuestro vuestra vuestros vuestras
meu minha meus minhas teu tua teus tuas nosso nossa nossos nossas
mio mia miei mie tuo tuoi tue suo suoi nostro nostra nostri nostre vostro vostra vostri vostre loro
мой моя моё мое мои моих моим моей наш наша наше наши наших нашим нашей ваш ваша ваше ваши ваших
твой твоя твои твоих
我的 我们的 私の 私たちの 우리 우리의 나의 저의
""".split())
FOREIGN_ENGLISH = frozenset("son sons die den hay pour plus uber fur par come file note resume".split())
_UNSPACED_STOP = re.compile("|".join(map(re.escape, sorted(
    (w for w in GENERIC_WORDS | FOREIGN_WORDS | POSSESSIVES if len(w) > 1 and unspaced_chars(w) == len(w)),
    key=lambda w: (-len(w), w)))))


def global_question(question: str) -> tuple[str, frozenset[str]]:
    """``question`` as an offline global search reads it, and the words it leaves out (to rate
    reports and to pick their sentences alike): the generic words, and in a question that does
    not read as English those of the other languages, cut out of a script written without spaces
    (its character pairs would straddle them: 要主, 题是), so that what is left of "主要主题是什么？"
    is no word, as of "What are the main themes?"; and the ``COLLECTION_WORDS`` (with the
    other languages' in a question that does not read as English) when no other word is left
    ("Who are the main characters?", "Quels sont les personnages principaux ?"). (``RELATION_WORDS`` are left out only where
    they match nothing: ``query._Search._extractive_global``.)"""
    if any(w in _ENGLISH_CUES for w in words(question)):
        cut, stop, collection = question, GENERIC_WORDS, COLLECTION_WORDS
    else:
        cut, stop = _UNSPACED_STOP.sub(" ", question), GENERIC_WORDS | FOREIGN_WORDS | POSSESSIVES | FOREIGN_ENGLISH
        collection = COLLECTION_WORDS | FOREIGN_COLLECTION_WORDS
    left = local_search.query_terms(cut, extra_stop=stop)
    if left and all(w in collection for w in left):
        stop |= collection   # ("Who are the main characters?")
    return cut, stop


# Cue words a question about one thing uses too ("Where was the key?", "the main street"): alone,
# or beside a word of the question's own, they make no question broad.
WEAK_CUES = frozenset("key main major common general broad principal dominant whole across".split())
# Generic words that say how a question asks, not what about: out of every local and basic search.
GENERIC_VERBS = frozenset("""
say says said tell told talk talks discuss discussed discusses mention mentioned mentions describe
described describes cover covered covers
""".split())


def content_stop(question: str, names: Sequence[str]) -> frozenset[str] | None:
    """The words a local or basic search leaves out of ``question``, or None for a question it
    cannot answer: a broad one ("What are the main themes?", "Who are the main characters?"),
    which a few passages sharing its words do not answer ("TE moved its main offices to
    Pellric" was quoted), or one of function words only ("What is it?", which quoted the most
    connected entities). A question with a strong cue ("themes", "overall", "summarize") leaves
    out every generic word ("What are the main themes of the Lantern Festival?": the festival);
    any other leaves out only the other languages' function words, the generic verbs and, beside
    a word of its own, the weak cues: the generic nouns it asks with are what it asks about ("Where
    was the key?", "Who was reading a book?" lost their subject). The words of the entity
    ``names`` it writes stay ("Climate Accord Talks")."""
    cut, stop = global_question(question)   # (cut: without the generic words of unspaced scripts)
    stop = stop - {w for name in names for w in words(name)}
    terms = local_search.query_terms(cut)
    generic = GENERIC_WORDS | COLLECTION_WORDS | FOREIGN_COLLECTION_WORDS
    asked = [t for t in terms if t in stop and t in generic]
    quiet = stop & ((stop - generic) | GENERIC_VERBS)   # (function words of the other languages)
    strong = any(t in GLOBAL_CUES and t not in WEAK_CUES for t in asked)
    if any(t not in stop for t in terms):   # a word of its own: a question about something
        return stop if strong else quiet | (stop & WEAK_CUES - {"key"})   # (a noun as often: "the key to the door")
    nouns = {t for t in asked if t not in GENERIC_VERBS}
    if strong or len(nouns) != 1:
        return None
    return quiet   # one generic noun alone is what it asks about


def broad_words(question: str) -> list[str]:
    """Up to 3 words that make ``question`` a broad one, to name it by: its cue words ("main,
    themes"), else its generic ones ("story", "characters"), else any; none for "What is it?"."""
    asked = local_search.query_terms(question)
    return ([w for w in asked if w in GLOBAL_CUES]
            or [w for w in asked if w in GENERIC_WORDS or w in COLLECTION_WORDS
                or w in FOREIGN_COLLECTION_WORDS] or asked)[:3]


_UNDECODED = re.compile("[\ud800-\udfff]")


def checked_question(question: str) -> str:
    """``question`` with its white space made single and its terminal escapes and control
    characters dropped (its invisible characters are left to the readers of its words);
    ``UsageError`` when it is empty, too long or has bytes that are not UTF-8."""
    if bad := _UNDECODED.search(question):
        # Python hands such bytes of the command line over as lone surrogates, which no model
        # request, cache key or JSON output can carry. Not guessed at: read as Latin-1, bytes of
        # another encoding (Shift JIS, GBK) would be searched as wrong letters, and answered.
        # (One the command line does not make, from a caller's string, is shown escaped: \\ud83d.)
        escaped = "surrogateescape" if "\udc80" <= bad.group() <= "\udcff" else "backslashreplace"
        shown_bytes = question[max(0, bad.start() - 20):bad.start() + 20].encode("utf-8", escaped)
        raise UsageError(f"the question has bytes that are not UTF-8 (in {shown_bytes!r}); set the "
                         "terminal or the script calling streamrag to UTF-8 (e.g. LANG=C.UTF-8) and ask again")
    # Terminal escapes pasted with it ("\x1b[1mSmith\x1b[0m", a name coloured, read as "1mSmith",
    # no name) are dropped as they are from what ask prints (``terminal.terminal_text``); a
    # control character parts words, as white space of every kind does: "Who is\x07Scrooge?"
    # was "Who isScrooge?", no name, where "Who is\rScrooge?" (a line end pasted) was two
    # words, and the index reads a document's words parted at either (``terms.words``).
    question = " ".join(terminal_text(" ".join(question.split()), controls=" ").split())
    # (a question of zero-width spaces only was accepted, and paid for a whole global search;
    # those inside one stay: a joiner is part of a Persian word or an emoji, and the search's
    # words are read without them anyway)
    if not question.translate(INVISIBLE_TABLE).strip():
        raise UsageError("the question is empty; ask something, e.g. "
                         "`streamrag ask \"What are the main themes?\"`")
    if all(unicodedata.category(ch)[0] in "PZ" for ch in question.translate(INVISIBLE_TABLE)):
        # ("?", "...": no word to search for, yet answered as "the question names nothing", by
        # a whole global search paid for with a model. An emoji or a symbol alone may ask something.)
        raise UsageError("the question has no words, only punctuation; ask something, "
                         "e.g. `streamrag ask \"What are the main themes?\"`")
    # Sent again with every rating and map batch. Words of scripts written without spaces count
    # as the answers count them (two characters a word), and a "word" of 100,000 letters by its
    # length: a question of one such word cost 60,000 prompt tokens.
    n = extractive.word_count(question)
    if n > MAX_QUESTION_WORDS or len(question) > MAX_QUESTION_CHARS:
        size = f"{n:,} words" if n > MAX_QUESTION_WORDS else f"{len(question):,} characters"
        raise UsageError(f"the question is {size} long; ask in at most {MAX_QUESTION_WORDS:,} words "
                         f"(two characters of a script written without spaces count as one) and "
                         f"{MAX_QUESTION_CHARS:,} characters: it is sent with every batch of reports a "
                         "global search reads; put long material in the indexed folder instead")
    return question


# --------------------------------------------------------------------------------------------
# Routing
# --------------------------------------------------------------------------------------------
NAMED_CANDIDATES = 50   # the entities a question's words match best, looked through for those it names


def named_entities(store: Store, question: str) -> list[tuple[str, str, bool]]:
    """(id, name, written capitalised) of the entities the question names (``local_search.is_named``);
    a name in a script without capitals counts as capitalised (global search opens the
    communities of the names written so, and auto mode weighs them as names)."""
    terms = local_search.query_terms(question)
    if not terms:
        return []
    asked = words(question)
    rows = store.conn.execute(   # the name as written: the FTS table's may be spelled as words
        "SELECT entities.id, entities.name FROM entities_fts JOIN entities USING (id) "
        "WHERE entities_fts MATCH ? ORDER BY bm25(entities_fts), entities.id LIMIT ?",
        ("name : (" + local_search.fts_match(terms) + ")", NAMED_CANDIDATES)).fetchall()
    out = []
    for eid, name in rows:
        if local_search.is_named(asked, name):
            # (a name in a script without capitals, 张伟 or محمد, is written as a name is)
            capitalised = not any(c.isupper() or c.islower() for c in name) or any(
                re.search(rf"\b{re.escape(w)}\b", question) for w in re.findall(r"[^\W\d_]+", name)
                if w[:1].isupper())
            out.append((eid, name, capitalised))
    return out + _joined_named(store, question, terms, {eid for eid, _n, _c in out})


def _joined_named(store: Store, question: str, terms: list[str], found: set[str]) -> list[tuple[str, str, bool]]:
    """(full name's id, short name as the question writes it, written capitalised) of the short
    names the question writes that an offline index joined to a full name (``joins``): "Who is
    Scrooge?" names "Ebenezer Scrooge" as "Scrooge", and is read as it was before the join."""
    joined = store.get_meta("name_joins")
    if not joined or joined == "{}":
        return []
    to = json.loads(joined)
    out = []
    # (read as names are, ``_tokens``: "O'Neill", joined to "Mary O'Neill", is one word, not "O" and
    # "Neill"; and a hyphened run whole before its words: "Jean-Luc", joined to "Jean-Luc Picard", is
    # neither "Jean" nor "Luc". Only here: which names a question lacks still reads it as ``_tokens``.)
    taken = 0   # where the last join found ends: its words are no names of their own
    for m in sorted([*_HYPHENED.finditer(question), *_tokens(question)], key=lambda m: (m.start(), -m.end())):
        token = m.group()
        full = to.get(ids.entity_id(token)) if any(w in terms for w in words(token)) else None
        if full is None or m.start() < taken:
            continue
        taken = m.end()
        if full not in found:
            found.add(full)
            out.append((full, token, token[:1].isupper()))
    return out


_TOKEN = re.compile(r"[^\W_]+")
_APOSTROPHED = re.compile(r"[^\W_]+(?:['’][^\W_]+)+")
_APOSTROPHE = re.compile("['’]")
# "Jean-Luc", a name ``_tokens`` reads as two words, and "D'Arcy-O'Neill", its parts apostrophed
# as ``_APOSTROPHED``'s are but for a possessive's "s" (of "Jean-Luc's", "Jean-Luc"). (Read as
# "D'Arcy", "Arcy-O" and "O'Neill", "D'Arcy-O'Neill" joined to "Anna D'Arcy-O'Neill" named no one.)
_HYPHENED = re.compile(r"[^\W_]+(?:['’](?![sS]\b)[^\W_]+)*(?:-[^\W_]+(?:['’](?![sS]\b)[^\W_]+)*)+")


def _tokens(question: str) -> list[re.Match[str]]:
    """The words of ``question`` as names are read: a capitalised word and the capitalised ones
    apostrophes join it to are one ("O'Brien", "D’Arcy", and of "O'Brien's"): as "O" and
    "Brien", "Mary O'Brien" was no name, and was never said missing. ("Scrooge's", "don't" and
    "d'Artagnan" are two words, as before; so are "O'BRIEN'S" and "O'BRIEN", its last "S" the
    possessive's written in capitals.)"""
    out: list[re.Match[str]] = []
    pos = 0
    for m in _APOSTROPHED.finditer(question):
        out += _TOKEN.finditer(question, pos, m.start())
        parts = _APOSTROPHE.split(m.group())
        joined = next((k for k, part in enumerate(parts)
                       if not part[:1].isupper() or (part == "S" and k == len(parts) - 1)), len(parts))
        start = m.start()
        if joined > 1:   # (each apostrophe is one character)
            end = start + len("'".join(parts[:joined]))
            out.append(_APOSTROPHED.match(question, start, end))
            start = end
        out += _TOKEN.finditer(question, start, m.end())
        pos = m.end()
    return out + list(_TOKEN.finditer(question, pos))
# Words that say a question is English (not those German, Dutch or French share: was, in, an, so, is).
_ENGLISH_CUES = frozenset("""the of what who whom whose which does did do how where when why and with
about from this that for they their were has have there into than been would could should""".split())
# The words a question asking yes or no opens with ("Is Scrooge McDuck here?"), which say it is
# English where a name follows at once: alone, "is" and "was" are Dutch and German words too
# ("Is het ...?", "Was ist Liebe?", whose "Liebe" is a noun, no name).
_YES_NO = frozenset("""is are was were am do does did has have had can could will would shall should
may might must""".split())
_SENTENCE_START = re.compile(r"(?:^|[.!?:;]['\"’”)]*)\s*['\"‘“(¿¡]*$")


def asks_more(question: str, names: list[str]) -> bool:
    """Whether ``question`` has words beyond ``names`` (and the words that ask nothing: in a
    question that does not read as English, the other languages' function words too, as
    ``global_question`` leaves them out; "Qui est Zorblax Quintrell ?" was searched as asking
    "qui est", and with a model paid for a whole global search to find nothing). Its generic
    words ask something ("the main themes of Zorblax"), as before."""
    held = {w for name in names for w in words(name)}
    cut, stop = global_question(question.translate(INVISIBLE_TABLE))
    quiet = stop - GENERIC_WORDS - COLLECTION_WORDS - FOREIGN_COLLECTION_WORDS
    return any(w not in held for w in local_search.query_terms(cut, extra_stop=quiet))


def missing_words(question: str, names: Sequence[str]) -> frozenset[str]:
    """The words of ``names`` (``unknown_names``) ``question`` has nowhere else, which a search
    leaves out: "zeno" and "ulmard" of "Did Zeno Ulmard meet Mira Osk?", whose sentences about
    other Zenos answer nothing it asks."""
    rest = question.translate(INVISIBLE_TABLE)
    for name in names:
        rest = rest.replace(name, " ")
    return frozenset(w for name in names for w in words(name)) - set(words(rest))


def unknown_names(store: Store, question: str, *, lower_case: bool = True) -> list[str]:
    """The names ``question`` writes capitalised that no text or entity of the index has (a
    person whose only file was deleted), as written, with the words of the name they are
    written in ("Jacob Cratchit" of an index with "Bob Cratchit" only, "Mr. Zorblax"); adjacent
    ones make one name. Those of words it has, but never together, too (``_never_together``),
    and, in a question asking nothing else and if ``lower_case``, those it writes in lower case
    (``_unwritten_in_lower_case``).

    A capitalised word opening a sentence, a stopword and a question written in Title Case or
    capitals (a stopword capitalised inside a sentence) say nothing about names. A word alone is
    not a name the index lacks when the index has it in another form ("Tuesdays", "Londoner":
    its first letters begin a word there), when it is short or an acronym ("USA", "CEO"), or
    when the question does not read as English (German writes every noun capitalised); two
    or more such words in a row are a name when one of them is absent in every form."""
    question = question.translate(INVISIBLE_TABLE)   # (as the search reads it)
    tokens = _tokens(question)
    english = any(t.group().lower() in _ENGLISH_CUES for t in tokens) or _asks_yes_or_no(question, tokens)
    opening = [bool(_SENTENCE_START.search(question[:t.start()])) for t in tokens]
    if 0 < len(tokens) <= 4 and all(t.group()[:1].isupper() for t in tokens) \
            and not any(t.group().lower() in local_search.STOPWORDS for t in tokens) \
            and not re.search(r"[.!?]\s", question):
        # A question that is a name alone ("Zyx Qwerty?"): its first word is part of it. (Not
        # "Hello. Zorblax?": two sentences; nor "Summarize Mira Osk", which asks with it.)
        opening, english = [i == 0 and _asks_with(store, question, tokens, 0) for i in range(len(tokens))], True
    unsure: set[int] = set()   # a sentence's first word taken for a name's below
    for i in range(len(tokens) - 1):
        # A sentence that opens on a name of two words or more ("I read the book. Zorblax
        # Quintrell?"): its first word is the name's, not only the sentence's ('Quintrell' alone).
        word, after = tokens[i].group(), tokens[i + 1]
        if opening[i] and word[:1].isupper() and after.group()[:1].isupper() \
                and not question[tokens[i].end():after.start()].strip() \
                and word.lower() not in local_search.STOPWORDS and word.lower() not in _ENGLISH_CUES \
                and not _asks_with(store, question, tokens, i):
            opening[i] = False
            unsure.add(i)
    for i in range(1, len(tokens)):
        # A point after a title or an initial ends no sentence: "Who is Mr. Zorblax?"
        if opening[i] and _in_name(question, tokens, i) and _name_token(tokens[i].group()):
            opening[i] = False
    sentence_case = any(t.group()[:1].islower() and t.group() not in _TITLE_CASE_SMALL for t in tokens)
    if any(t.group()[:1].isupper() and t.group() != "I" and t.group().lower() in local_search.STOPWORDS
           and not first and not (sentence_case and _glued(question, tokens, i))
           for i, (t, first) in enumerate(zip(tokens, opening, strict=True))):
        return []
    absent: list[int] = []
    strong: set[int] = set()   # absent in every form (not an acronym)
    for i, t in enumerate(tokens):
        tok = t.group()
        ws = words(tok)
        if (len(tok) < 2 or not tok[:1].isupper() or opening[i]
                or not ws or any(w in local_search.STOPWORDS for w in ws)):
            continue
        if _has_words(store, '"' + " ".join(ws) + '"'):
            continue
        absent.append(i)
        if len(ws) > 1 or (not tok.isupper() and _in_no_form(store, ws[0])):
            strong.add(i)
    names: list[list[int]] = []
    for i in absent:
        if names and names[-1][-1] == i - 1 and _in_name(question, tokens, i):
            names[-1].append(i)
        else:
            names.append([i])
    found = []
    for run in names:
        if not strong & set(run):
            continue
        # The whole name it is written in: "Jacob Cratchit", "Mayor Zorblax" (the index's
        # "Cratchit" and "Mayor" are not who it asks about, nor searched for).
        first, last = run[0], run[-1]
        while first > 0 and _in_name(question, tokens, first) and not opening[first - 1] \
                and _name_token(tokens[first - 1].group()):
            first -= 1
        while last + 1 < len(tokens) and _in_name(question, tokens, last + 1) \
                and _name_token(tokens[last + 1].group()):
            last += 1
        # A short word alone may be anything ("Tom?"); written before a name's word, not first
        # in a sentence ("Ask Mira Osk."), it is a name's: "Bob Marley" of an index with no Bob
        # was not missing, and quoted Gideon Marley. (After one it may be a word capitalised
        # as in a title: "Did Mira Osk Quit?")
        beside = run[0] not in unsure and any(
            not _shortened(tokens[i].group()) for i in range(run[-1] + 1, last + 1))
        if len(run) > 1 or english and (len(tokens[run[0]].group()) >= 5
                                        or beside and not _shortened(tokens[run[0]].group())):
            found.append((tokens[first].start(), tokens[last].end()))
    found += _never_together(store, question, tokens, opening, set(absent))
    lower = _unwritten_in_lower_case(store, question, tokens) if english and lower_case else []
    if lower and not asks_more(question, [question[start:end] for start, end in found + lower]):
        # Only when the question asks about nothing else: two words the index never writes
        # may be a topic ("what do the reports say about quantum chromodynamics?"), where the
        # search's own "nothing matches" is the answer, not a name's.
        found += lower
    return list(dict.fromkeys(question[start:end] for start, end in sorted(found)))


def _in_no_form(store: Store, word: str) -> bool:
    """Whether the index has ``word`` (which it lacks as written) in no other form either: its
    first letters begin no word there ("Tuesdays" of "Tuesday", "Londoner" of "London"). A
    short word's first letters begin many, so one under five letters is taken as absent."""
    return len(word) < 5 or not _has_words(store, f'"{word[:max(4, len(word) - 3)]}" *')


# Words a question asks with, never a name's, however rare in the index ("themes", "summary").
_ASKING_WORDS = GENERIC_WORDS | COLLECTION_WORDS | RELATION_WORDS | _ENGLISH_CUES | _YES_NO


def _unwritten_in_lower_case(store: Store, question: str, tokens: list[re.Match[str]]) -> list[tuple[int, int]]:
    """(start, end) of the runs of words an English question writes in lower case that may be
    a name the index lacks ("who is ada osk?", asked as "Who is Ada Osk?" is): two or more
    words in a row, apart by a space or a hyphen, none a stopword or a word questions ask with,
    each in no text or entity name of the index in any form (``_in_no_form``). A word alone is
    left: "protagonist" or "characters" may be missing from a novel's text and still ask
    something. The question's words that the index has ("how does scrooge change?") are no
    name it lacks. (``unknown_names`` takes them only from a question asking nothing else.)"""
    runs: list[list[int]] = []
    for i, t in enumerate(tokens):
        ws = words(t.group())
        if not t.group()[:1].islower() or len(ws) != 1 or ws[0] in local_search.STOPWORDS \
                or ws[0] in _ASKING_WORDS or _has_words(store, f'"{ws[0]}"') or not _in_no_form(store, ws[0]):
            continue
        if runs and runs[-1][-1] == i - 1 and _in_name(question, tokens, i):
            runs[-1].append(i)
        else:
            runs.append([i])
    return [(tokens[run[0]].start(), tokens[run[-1]].end()) for run in runs if len(run) > 1]


def _asks_yes_or_no(question: str, tokens: list[re.Match[str]]) -> bool:
    """Whether ``question`` asks yes or no of a name in English: it opens with "Is", "Are",
    "Did" ... (``_YES_NO``), a capitalised word follows at once, and it ends in a question mark.
    ("Is Scrooge McDuck here?" has no other English word, and the name was never said missing.)"""
    return (len(tokens) > 1 and tokens[0].group().lower() in _YES_NO and tokens[1].group()[:1].isupper()
            and question.rstrip().endswith("?"))


# Words that say what someone is, not which one ("Mr Scrooge", "Dr. Ulmard", "Mayor Ilse
# Brandt"): left out when a name's words are looked for together, so that another title, or
# none, is the same name.
TITLES = frozenset("""
mr mrs ms miss mx dr doctor prof professor sir dame lady lord st saint rev reverend fr father
mother sister brother uncle aunt capt captain col colonel gen general lt lieutenant sgt sergeant
major mayor judge president senator governor minister chancellor king queen prince princess duke
duchess count countess baron baroness master mistress madam madame mme mlle monsieur herr frau
senor senora don dona director chairman chairwoman chief inspector detective bishop emperor empress
""".split())


def _never_together(store: Store, question: str, tokens: list[re.Match[str]], opening: list[bool],
                    absent: set[int]) -> list[tuple[int, int]]:
    """(start, end) of the names ``question`` writes whose every word the index has, but never
    together: "Zeno Ulmard" of an index with "Zeno Ulmford" and "Greta Ulmard" only.

    A name is a run of two or more capitalised words (not an acronym, nor a sentence's first
    word: ``opening``), apart by a space or a hyphen, or by a point after a title or an initial
    ("Dr. Zeno Ulmard", "J. Ulmard"), whose words the texts write capitalised (``_name_word``);
    a run with a word the index lacks (``absent``) is left to ``unknown_names``. Titles and
    initials are left out of its words ("Mrs Ulmard" and "Dr. Ulmard" are one name), and it is
    in the index when two of its words in a row are (``_together``), so a longer run holding a
    name ("Kessel Mira Osk", "Mayor Ilse Brandt") is no missing name."""
    runs: list[list[int]] = []
    for i, t in enumerate(tokens):
        if not _name_token(t.group()) or i in absent and not _shortened(t.group()):
            continue
        if runs and runs[-1][-1] == i - 1 and _in_name(question, tokens, i):
            runs[-1].append(i)
        elif not opening[i]:
            runs.append([i])
    out = []
    for run in runs:
        own = [w for i in run if not _shortened(tokens[i].group()) for w in words(tokens[i].group())]
        if len(own) < 2 or any(_together(store, a, b) for a, b in zip(own, own[1:])) \
                or not all(_name_word(store, w) for w in own):
            continue
        out.append((tokens[run[0]].start(), tokens[run[-1]].end()))
    return out


# The words a title in Title Case writes in lower case ("What Is the Role of Zorblax?"): a
# question with any other word so ("did", "meet") is written as a sentence.
_TITLE_CASE_SMALL = frozenset("a an the of in on at to for and or but nor by with from as into vs".split())


def _glued(question: str, tokens: list[re.Match[str]], i: int) -> bool:
    """Whether ``tokens[i]``, a stopword capitalised inside a question written as a sentence, is
    a sentence's first word copied with the name written after it at once ("What did Up Scrooge
    do?" of the text's "Up Scrooge went"): a capitalised word that is no stopword follows.
    Such a word is no name's (stopwords never are: "Scrooge" is asked about), and it does not
    make the question one in Title Case, whose names say nothing: "Did Up Scrooge meet Jacob
    Cratchit?" said nothing of Jacob Cratchit, whom the index lacks."""
    if i + 1 >= len(tokens):
        return False
    after = tokens[i + 1].group()
    return _in_name(question, tokens, i + 1) and after[:1].isupper() and after.lower() not in local_search.STOPWORDS


def _name_token(tok: str) -> bool:
    """Whether the word ``tok`` of a question may be a name's: capitalised, not an acronym
    ("USA CEO") and no stopword."""
    return tok[:1].isupper() and not (len(tok) > 1 and tok.isupper()) and tok.lower() not in local_search.STOPWORDS


def _shortened(tok: str) -> bool:
    """Whether ``tok`` is a title or an initial, which a point may follow ("Dr.", "J.")."""
    return len(tok) == 1 or tok.lower() in TITLES


def _in_name(question: str, tokens: list[re.Match[str]], i: int) -> bool:
    """Whether ``tokens[i]`` is written in one name with the word before it: apart by a space
    or a hyphen, or by a point after a title or an initial ("Dr. Zeno Ulmard", "J. Ulmard")."""
    if i == 0:
        return False
    gap = question[tokens[i - 1].end():tokens[i].start()].strip()
    return gap in ("", "-") or gap == "." and _shortened(tokens[i - 1].group())


def _chunk_texts(store: Store, match: str) -> Iterator[str]:
    """The texts of up to 50 chunks the FTS5 expression ``match`` finds, read as they are asked for."""
    return (text for (text,) in store.conn.execute(
        "SELECT chunks.text FROM chunks_fts JOIN chunks USING (id) WHERE chunks_fts MATCH ? LIMIT 50", (match,)))


def _name_word(store: Store, word: str) -> bool:
    """Whether the texts of the index write ``word`` capitalised at least as often as not (of
    up to 50 that have it): a name's ("Zeno", "Cratchit"), not a word a question capitalises
    ("Christmas Dinner", "Nephew Fred", "London Town": the texts' "dinner", "nephew", "town")."""
    found = re.compile(rf"(?<![^\W_]){re.escape(word)}(?![^\W_])", re.IGNORECASE)
    capital = lower = 0
    for text in _chunk_texts(store, local_search.fts_match([word])):
        for m in found.finditer(text):
            capital += m.group()[:1].isupper()
            lower += m.group()[:1].islower()
    return capital >= lower


def _together(store: Store, a: str, b: str) -> bool:
    """Whether the index has the words ``a b`` together: as a phrase of a text, in one sentence
    ("Zeno\nUlmard", across a line break; not "Zeno. Ulmard"), both in one entity's name, in
    any order and with others ("Scrooge Ebenezer", "Vell Academy" of "Vell Maritime Academy"),
    in one run of capitalised words of a text ("Kessel City Council" for "Kessel Council":
    ``_one_run``), or close in a text (three words apart at most, in any order) where the first
    is someone's whole name ("Martha?' cried Bob Cratchit": the index's "Martha" may be the
    "Martha Cratchit" asked about; but a "Mr. Marstad" beside "Nadia Harberg" is no "Nadia
    Marstad")."""
    qa, qb = local_search.fts_match([a]), local_search.fts_match([b])
    if (_in_one_sentence(store, a, b)
            or store.scalar("SELECT 1 FROM entities_fts WHERE entities_fts MATCH ? LIMIT 1",
                            (f"name : ({qa} AND {qb})",))):
        return True
    close = list(_chunk_texts(store, f"NEAR({qa} {qb}, 3)"))
    if not close:
        return False
    if _one_run(close, a, b):
        return True
    return any([w for w in words(name) if w not in TITLES] == [a] for (name,) in store.conn.execute(
        "SELECT name FROM entities_fts WHERE entities_fts MATCH ? LIMIT 2000", (f"name : ({qa})",)))


# What parts two names: a sentence's end, a comma or the like, a blank line (a heading's end).
_APART = re.compile(r"[.!?;:,…)\]]+['\"’”]*\s|\n\s*\n")


def _in_one_sentence(store: Store, a: str, b: str) -> bool:
    """Whether a text (of up to 50 FTS finds for the phrase "a b") writes ``a b`` within one
    sentence: FTS reads past punctuation, and "Who is Zeno Ulmard?" of "... spoke to Zeno.
    Ulmard said nothing" was no missing name. (Across a line break it is one: "Zeno\nUlmard".)"""
    for text in _chunk_texts(store, local_search.fts_match([f"{a} {b}"])):
        for part in _APART.split(text):
            ws = words(part)
            if any(x == a and y == b for x, y in zip(ws, ws[1:])):
                return True
    return False


def _one_run(texts: list[str], a: str, b: str) -> bool:
    """Whether a text (of ``texts``: up to 50 with ``a`` and ``b`` close) writes ``a``, then
    ``b`` one to three words on, all of them capitalised: "Kessel City Council" for "Kessel
    Council", a name shortened by a word of its middle, where no entity's name holds both (a
    model named it "City Council"). Not across a point or a comma ("Zeno Ulmford. Greta
    Ulmard"), nor past a word in lower case ("Nadia Harberg met Mr. Marstad")."""
    for text in texts:
        for m in _FIRST_WORD.finditer(text):
            if not m.group()[:1].isupper() or words(m.group())[:1] != [a]:
                continue
            pos, between = m.end(), 0
            while between <= 3 and (w := _RUN_WORD.match(text, pos)) and w.group(1)[:1].isupper():
                # (A word as the index has it: "Council's" is "council", "Zoë" is "zoe".)
                if between and words(w.group(1))[:1] == [b]:
                    return True
                pos, between = w.end(), between + 1
    return False


_RUN_WORD = re.compile(r"\s+([^\W_][\w'’-]*)")   # the next word of a run of names, space before it
_FIRST_WORD = re.compile(r"(?<![\w'’-])[^\W_][\w'’-]*")   # a word that may begin one


NEAR_NAMES = 5   # the names of the index an answer offers for one it lacks


def near_names(store: Store, name: str) -> list[str]:
    """The names of the index closest to ``name`` (one it lacks, ``unknown_names``): those of
    the entities sharing a word of it (titles and initials aside), the most alike in their
    letters first, then the most mentioned ("Zeno Ulmford" and "Greta Ulmard" for "Zeno
    Ulmard"); none for a name none shares a word with."""
    own = [w for w in words(name) if len(w) > 1 and w not in TITLES and w not in local_search.STOPWORDS]
    if not own:
        return []
    rows = store.conn.execute(
        "SELECT entities.name, entities.mentions FROM entities_fts JOIN entities USING (id) "
        "WHERE entities_fts MATCH ? ORDER BY entities.mentions DESC, entities.name LIMIT 500",
        ("name : (" + local_search.fts_match(own) + ")",)).fetchall()
    asked = " ".join(own)
    # By the words shared, in turn, so that one common word ("Zeno", 57 people) does not crowd
    # out those of the other ("Greta Ulmard"); each group's most alike first, to a tenth (which
    # other first name is more like "Zeno" says little), then the most mentioned.
    # (not one word, titles aside, that a longer name writes: "Jacob Marley", not "Marley" too;
    # "Master Peter Cratchit", not "Master Peter"; but "Mrs. Cratchit" beside "Bob Cratchit")
    written = [words(name) for name, _m in rows]
    groups: dict[frozenset[str], list[tuple[float, int, str]]] = {}
    for (name, mentions), have in zip(rows, written, strict=True):
        shared = frozenset(have) & frozenset(own)
        if shared and not (len([w for w in have if w not in TITLES]) == 1 and any(
                len(other) > len(have) and local_search.runs(other, have) for other in written)):
            alike = difflib.SequenceMatcher(None, asked, " ".join(words(name))).ratio()
            groups.setdefault(shared, []).append((-round(alike, 1), -mentions, name))
    ordered = sorted((sorted(group) for group in groups.values()), key=lambda g: (g[0], len(g)))
    taken: dict[frozenset[str], str] = {}   # (one form of a name: "Mayor Ilse Brandt" or "Ilse Brandt")
    for row in (row for turn in itertools.zip_longest(*ordered) for row in turn if row):
        taken.setdefault(frozenset(w for w in words(row[2]) if w not in TITLES), row[2])
    return list(taken.values())[:NEAR_NAMES]


def _asks_with(store: Store, question: str, tokens: list[re.Match[str]], i: int) -> bool:
    """Whether ``tokens[i]``, opening a sentence, is a word a question asks with ("Summarize",
    "Overview"), not a name's first word: a generic word followed by no capitalised word, by two
    or more ("Summarize Mira Osk", "Summarize Zorblax Quintrell"), or by one the index has
    ("Summarize Kessel"). Followed by one it lacks, it is the name's own ("Story Musgrave?",
    "Post Malone?": 'Nothing in the index mentions "Musgrave"')."""
    ws = words(tokens[i].group())
    if len(ws) != 1 or ws[0] not in GENERIC_WORDS:
        return False
    end = i + 1
    while end < len(tokens) and tokens[end].group()[:1].isupper() \
            and not question[tokens[end - 1].end():tokens[end].start()].strip():
        end += 1
    if end - i != 2:
        return True
    return _has_words(store, '"' + " ".join(words(tokens[i + 1].group())) + '"')


def _has_words(store: Store, match: str) -> bool:
    """Whether a text or an entity name of the index matches the FTS5 expression ``match``."""
    return bool(store.scalar("SELECT 1 FROM chunks_fts WHERE chunks_fts MATCH ? LIMIT 1", (match,))
                or store.scalar("SELECT 1 FROM entities_fts WHERE entities_fts MATCH ? LIMIT 1",
                                (f"name : ({match})",)))


def choose_mode(store: Store, question: str, named: list[tuple[str, str, bool]] | None = None,
                anchored: Sequence[tuple[str, str]] | None = None,
                missing: frozenset[str] = frozenset()) -> tuple[str, str]:
    """``global`` or ``local`` for ``question`` and why, without a model call (``named`` and
    ``anchored``: its ``named_entities`` and their ``local_search.anchors``, when the caller
    has them; ``missing``: the words of the names it lacks, which no search looks for,
    ``missing_words``)."""
    qwords = words(question)
    # (a weak cue alone, "Where was the key?", is left to content_stop below)
    cues = sorted({w for w in qwords if w in GLOBAL_CUES - WEAK_CUES})
    named = named_entities(store, question) if named is None else named
    # Each name written counts once: "Kessel Bridge" is one name whether or not the index also
    # has "Kessel" (the offline extractor makes entities of a name's parts), and one entity
    # per type of a name is one name too; counted so, a two-word name outweighed a cue
    # ("What are the main themes of the Kessel Bridge?" went local, "... of the Lantern Hall?" global).
    # The names it writes, as local search anchors on them: not "Pellric" inside "2032 Pellric
    # Flood", but "Pellric" too where the question writes it apart ("... around Pellric and the
    # 2032 Pellric Flood?", two names: with the longest names only it weighed one against a cue,
    # and went global).
    asked = words(question)
    if anchored is None:
        anchored = local_search.anchors(question, [(eid, name) for eid, name, _ in named])
    asked_about = set(anchored)
    written: dict[frozenset[str], tuple[str, bool]] = {}   # the words naming it: (name shown, capitalised)
    for _, name, cap in (n for n in named if n[:2] in asked_about):
        key = frozenset(local_search.name_words(name))
        shown, was_cap = written.get(key, (name, False))
        if key in written and local_search.writes_more_of(asked, words(name), words(shown)):
            shown = name   # the name as the question writes it ("Scrooge", not "Up Scrooge")
        written[key] = (shown, was_cap or cap)
    local_score = sum(1 if cap else 0.5 for _, cap in written.values())
    names = ", ".join(dict.fromkeys(n for n, _ in list(written.values())[:3]))
    if named and local_score > len(cues):
        return "local", f"the question names {names}"
    if named and local_score == len(cues) and all(c in SUMMARY_CUES for c in cues):
        # A tie of summary cues only: a summary of what it names, not of the collection (since
        # 4b0ef16 a name weighs once, and "Summarize Rosalind Joroux" went global).
        return "local", f"the question asks for a summary ({', '.join(cues[:3])}) of what it names: {names}"
    if cues and named:   # (global search reads the communities of the names it writes)
        return "global", (f"the question asks about the collection ({', '.join(cues[:3])}), and "
                          f"the names it has ({names}) do not outweigh that")
    if cues:
        return "global", "the question asks about the collection as a whole (" + ", ".join(cues[:3]) + ")"
    stop = content_stop(question, [])   # (nothing named: named is empty here)
    if stop is None:
        # Only generic and function words ("What are my notes about?", "¿De qué tratan mis
        # notas?"): their few matches in entity names are not what it asks about.
        shown = broad_words(question)
        return "global", ("the question asks about the collection as a whole (" + ", ".join(shown) + ")"
                          if shown else "the question names nothing, so the community reports answer it")
    # The words local search would look for (``query._Search.local_stop``): with English stopwords only,
    # the German "die" of "Wer sind die Figuren?" matched "... will die" and went local to find
    # nothing of what it asks.
    # (not the words of a name the index lacks: "Bob Marley" matched its Gideon Marley)
    if local_search.fts_entities(store, question, 1, extra_stop=stop | missing):
        return "local", "the question's words match entities of the index"
    return "global", "the question matches no entity, so the community reports answer it"
